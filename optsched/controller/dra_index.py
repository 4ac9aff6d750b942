"""What the webhook's DRA answer reads, kept by every replica: placement records and GPU claim templates.

Every replica runs the controller's informers (a follower keeps its caches
warm), so the records come from the Workload informer's events: each event
replaces or drops one entry of a dict keyed by namespace and plan id. The
webhook's threads only ``get`` from it (a single dict lookup, atomic in
CPython), the event loop alone writes it.

A pod is created right after its workload's check turns Ready, so its record
may not have reached this replica's informer yet. On a miss the webhook reads
the namespace's Workloads once, live, through the event loop (bounded by
:data:`LIVE_READ_S`); concurrent misses of one namespace wait for that one
list, and its answer serves every miss for :data:`LIST_KEPT_S` (a Job of a
thousand pods costs one list, not a thousand); if it fails the pod gets no claim (fail open): it
is node-pinned only and counted as enforcement ``none``, never refused or
held, since a missing claim costs the pin its device guarantee but not its
node. ResourceClaimTemplates are read live on first use and remembered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from optsched.controller.claims import template_gpu_request
from optsched.controller.webhook import DraFacts
from optsched.kube.client import ApiError, Client
from optsched.kueue.placement_record import PlacementRecord, RecordError, record_of
from optsched.model.names import KUEUE_API, RESOURCE_API

log = logging.getLogger("optsched.webhook")

LIVE_READ_S = 2.0
"""The longest a webhook answer waits on a live read (the webhook's own timeout is 5 s)."""
TEMPLATES_KEPT = 4096
LIST_KEPT_S = 1.0
"""How long one live list of a namespace's Workloads answers every pod that misses the index."""
LISTS_KEPT = 1024


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return str((meta or {}).get("namespace", "default")), str((meta or {}).get("name", ""))


def _record(obj: Mapping[str, Any]) -> PlacementRecord | None:
    try:
        return record_of(obj)
    except RecordError:
        return None


class DraIndex:
    """Records by (namespace, plan id), fed by Workload watch events."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], PlacementRecord] = {}
        self._plan_of: dict[tuple[str, str], str] = {}
        """Workload (namespace, name) -> the plan id of its record, to drop it when it changes."""
        self.templates: dict[tuple[str, str], int | None] = {}

    def chained(self, then: Callable[[Mapping[str, Any]], None]) -> Callable[[Mapping[str, Any]], None]:
        """A Workload event handler that takes the event in, then calls ``then``."""

        def handle(event: Mapping[str, Any]) -> None:
            self.on_workload(event)
            then(event)

        return handle

    def on_workload(self, event: Mapping[str, Any]) -> None:
        """Take in one Workload event (on the event loop)."""
        obj = event.get("object") if isinstance(event.get("object"), dict) else {}
        key = _key(obj or {})
        old = self._plan_of.pop(key, None)
        if old is not None:
            self.records.pop((key[0], old), None)
        record = None if event.get("type") == "DELETED" else _record(obj or {})
        if record is not None:
            self._plan_of[key] = record.plan_id
            self.records[(key[0], record.plan_id)] = record


class LiveFacts:
    """The webhook's :class:`DraFacts`: the index, and live reads on the event loop on a miss."""

    def __init__(
        self, index: DraIndex, client: Client, loop: asyncio.AbstractEventLoop, *, claims: bool = True
    ) -> None:
        self.index, self.client, self.loop = index, client, loop
        self.claims = claims
        """False (``--no-dra-claims``): no pod gets a claim."""
        self.clock: Callable[[], float] = time.monotonic
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._lists: dict[str, tuple[float, dict[str, PlacementRecord]]] = {}
        """namespace -> when it was listed live and its records by plan id."""

    def facts(self) -> DraFacts:
        return DraFacts(records=self.record, templates=self.template, claims=self.claims)

    def _live(self, job: Any) -> Any:
        """Run ``job`` on the event loop from a webhook thread; None if it fails or is late."""
        future = asyncio.run_coroutine_threadsafe(job, self.loop)
        try:
            return future.result(timeout=LIVE_READ_S)
        except (ApiError, FutureTimeout) as exc:
            future.cancel()
            log.warning("webhook: live read failed (%s); the pod gets no claim", exc)
            return None

    def record(self, namespace: str, plan_id: str) -> PlacementRecord | None:
        found = self.index.records.get((namespace, plan_id))
        if found is not None:
            return found
        return self._listed(namespace).get(plan_id)

    def _listed(self, namespace: str) -> Mapping[str, PlacementRecord]:
        """The namespace's records from a live list: one list at a time per namespace, its answer (or
        its failure, as no records) reused for :data:`LIST_KEPT_S` by every pod arriving meanwhile."""
        with self._guard:
            lock = self._locks.setdefault(namespace, threading.Lock())
        with lock:
            kept = self._lists.get(namespace)
            if kept is not None and self.clock() - kept[0] < LIST_KEPT_S:
                return kept[1]
            items = self._live(self.client.list(KUEUE_API, "workloads", namespace=namespace))
            records = {r.plan_id: r for r in (_record(o) for o in items or ()) if r is not None}
            with self._guard:
                if len(self._lists) >= LISTS_KEPT:
                    self._lists.clear()
                self._lists[namespace] = (self.clock(), records)
            return records

    def template(self, namespace: str, name: str) -> int | None:
        key = (namespace, name)
        if key in self.index.templates:
            return self.index.templates[key]
        obj = self._live(self.client.get(RESOURCE_API, "resourceclaimtemplates", name, namespace=namespace))
        if obj is None:
            return None
        found = template_gpu_request(obj)
        count = found[0] if not isinstance(found, str) else None
        if len(self.index.templates) >= TEMPLATES_KEPT:
            self.index.templates.clear()
        self.index.templates[key] = count
        return count
