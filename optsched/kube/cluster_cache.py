"""The controller's view of the cluster: one informer per kind a snapshot reads, read like ``read_cluster``.

The controller's read phase used to list every Node, Pod and Workload of the
cluster each cycle; here each kind of :data:`~optsched.kube.documents.KINDS`
is listed once and then watched (:mod:`optsched.kube.informer`), and a cycle
reads the caches. Pods are watched through a field selector that leaves out
finished ones (a pod that finishes arrives as DELETED) and are cached in the
slim form of :func:`~optsched.kube.slim.slim_pod`. With ``namespaces``, the
queue (LocalQueues, Workloads) is watched in those namespaces only, as
``read_cluster`` lists it; everything else is cluster-wide.

:meth:`ClusterCache.objects` is what ``read_cluster`` returns (cluster facts
first, pods that hold capacity only); :meth:`ClusterCache.pods` the pods the
controller acts on. Where the informers do not run (one cycle, a test),
:meth:`ClusterCache.list_once` fills the caches with one list per kind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from optsched.kube.client import Client, Object
from optsched.kube.documents import KINDS, Kind, keep_pod
from optsched.kube.informer import DEFAULT_TIMING, Informer, OnChange, Source, Timing
from optsched.kube.slim import slim_pod
from optsched.model.names import KUEUE_QUEUE_NAME_LABEL, PLAN_ID_LABEL, SCHEDULING_GATE

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
"""Pods that still hold (or will hold) capacity; one that finishes leaves the selector as DELETED."""


class NotSynced(Exception):
    """The caches were not listed in time: the read is skipped."""


def _gated_by_us(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    gates = (spec or {}).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(gate, dict) and gate.get("name") == SCHEDULING_GATE for gate in gates
    )


def acted_on(pod: Mapping[str, Any]) -> bool:
    """A pod the controller acts on: ours (plan-id label), of a Kueue queue, or holding our gate."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    labels = (meta or {}).get("labels")
    labels = labels if isinstance(labels, dict) else {}
    return bool(labels.get(PLAN_ID_LABEL) or labels.get(KUEUE_QUEUE_NAME_LABEL)) or _gated_by_us(pod)


class ClusterCache:
    """The informers of one controller, and reads of their caches."""

    def __init__(
        self,
        client: Client,
        *,
        namespaces: Sequence[str] = (),
        on_change: Mapping[str, OnChange] | None = None,
        timing: Timing = DEFAULT_TIMING,
    ) -> None:
        handlers = on_change or {}
        self.informers: list[tuple[Kind, Informer]] = []
        for kind in KINDS:
            scopes: list[str | None] = list(namespaces) if kind.by_namespace and namespaces else [None]
            for namespace in scopes:
                source = Source(
                    kind.kind,
                    kind.plural,
                    tuple(kind.api_versions()),
                    namespace=namespace,
                    field_selector=POD_FIELD_SELECTOR if kind.kind == "Pod" else None,
                    optional=kind.optional,
                )
                informer = Informer(
                    client,
                    source,
                    transform=slim_pod if kind.kind == "Pod" else None,
                    on_change=handlers.get(kind.kind),
                    timing=timing,
                )
                self.informers.append((kind, informer))
        self.running = False
        """True while :meth:`run` keeps the caches current."""

    def run(self) -> Coroutine[Any, Any, None]:
        """Run every informer until cancelled.

        :attr:`running` is set as soon as this is called, so a read made before
        the returned coroutine first runs waits for its list instead of listing
        on its own.
        """
        self.running = True
        return self._run()

    async def _run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for _, informer in self.informers:
                    group.create_task(informer.run())
        finally:
            self.running = False

    async def list_once(self) -> None:
        """Fill every cache with one list (no watch); :class:`~optsched.kube.client.ApiError` if one fails."""
        for _, informer in self.informers:
            await informer.list_once()

    async def ready(self, timeout: float) -> None:
        """Caches to read from: synced while the informers run (else :class:`NotSynced`), else listed now."""
        if self.running:
            await self.wait_synced(timeout)
        else:
            await self.list_once()

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for _, informer in self.informers)

    async def wait_synced(self, timeout: float) -> None:
        """Return once every cache was listed; :class:`NotSynced` naming the others after ``timeout``."""
        waits = [informer.synced.wait() for _, informer in self.informers if not informer.synced.is_set()]
        if not waits:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waits)
        if not self.synced:
            raise NotSynced(f"caches not synced within {timeout:g}s: {'; '.join(self.unsynced())}")

    def unsynced(self) -> list[str]:
        """Each cache not listed yet, with its last error."""
        return [
            f"{informer.source}" + (f" ({informer.error})" if informer.error else "")
            for _, informer in self.informers
            if not informer.synced.is_set()
        ]

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per kind not served (optional CRDs excepted) or not readable."""
        return tuple(
            informer.note
            for kind, informer in self.informers
            if informer.note and not (kind.quiet_if_absent and "not served" in informer.note)
        )

    def of_kind(self, kind: str) -> list[Object]:
        return [obj for k, informer in self.informers if k.kind == kind for obj in informer.items()]

    def objects(self) -> list[Object]:
        """What ``read_cluster`` returns: every kind, cluster facts first; pods where they hold capacity."""
        out: list[Object] = []
        for kind, informer in self.informers:
            items = informer.items()
            out += [pod for pod in items if keep_pod(pod)] if kind.kind == "Pod" else items
        return out

    def pods(self) -> list[Object]:
        """Every cached pod the controller acts on (:func:`acted_on`)."""
        return [pod for pod in self.of_kind("Pod") if acted_on(pod)]

    def sizes(self) -> dict[str, int]:
        """Objects cached per kind."""
        out: dict[str, int] = {}
        for kind, informer in self.informers:
            out[kind.kind] = out.get(kind.kind, 0) + len(informer)
        return out
