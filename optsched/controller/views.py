"""Frozen views of the raw Workloads and pods, parsed once where they enter the cycle.

A raw object is read here and nowhere else: the planning input, the decision
rules and the ungater work on these values. A Workload's view holds what the
controller acts on (identity, our check entry, the quota reservation, the
placement record, where it stands) and, when asked for, its spec as the
planner reads it. A malformed spec or record is not an exception but a
``problem`` on the view: the workload is reported and never planned, and the
rest of the queue goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from optsched.controller.records import PlacementRecord, RecordError, record_of
from optsched.errors import InputError
from optsched.kueue import workload_status as ks
from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    KUEUE_PODSET_LABEL,
    PLAN_ID_LABEL,
    POD_INDEX_ANNOTATION,
    PODSET_LABEL,
    SCHEDULING_GATE,
)
from optsched.model.snapshot import CheckState, Workload
from optsched.snapshot.kueue_objects import parse_workload

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class WorkloadView:
    """One Workload as the controller sees it."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    api_version: str
    check: ks.CheckEntry | None
    """Our check's entry; None on workloads that do not wait on one of our checks."""
    lifecycle: ks.Lifecycle
    holds_quota: bool
    quota_reserved_since: datetime | None
    cluster_queue: str | None
    """The reservation's ClusterQueue, else the one its LocalQueue points to (None if unknown)."""
    record: PlacementRecord | None
    workload: Workload | None = None
    """The spec as the planner reads it; None where it was not read or is malformed."""
    problem: str | None = None
    """Why the workload cannot be planned (malformed spec or record), in one line."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def live(self) -> bool:
        """Neither finished nor deactivated: the only workloads the controller touches."""
        return self.lifecycle not in (ks.Lifecycle.FINISHED, ks.Lifecycle.INACTIVE)

    @property
    def awaits_decision(self) -> bool:
        """Quota reserved and our check Pending: this cycle's plan decides it."""
        return (
            self.live
            and self.holds_quota
            and self.check is not None
            and self.check.state == CheckState.PENDING
        )


def read_workload(
    obj: dict[str, Any],
    check_names: Iterable[str],
    local_queues: Mapping[tuple[str, str], str] | None = None,
    *,
    spec: bool = True,
) -> WorkloadView:
    """The view of one raw Workload; with ``spec``, its spec is parsed for the planner too.

    ``local_queues`` maps ``(namespace, name)`` to a ClusterQueue, for
    workloads without a reservation yet.
    """
    m = ks.meta(obj)
    problem: str | None = None
    workload: Workload | None = None
    if spec:
        try:
            workload = parse_workload(obj)
        except InputError as exc:
            problem = str(exc)
        except (TypeError, AttributeError, ValueError) as exc:
            problem = f"{ks.key_of(obj)}: unreadable ({exc})"
    try:
        record = record_of(obj)
    except RecordError as exc:
        record, problem = None, problem or str(exc)
    return WorkloadView(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        uid=str(m.get("uid", "")),
        resource_version=str(m.get("resourceVersion", "")),
        api_version=str(obj.get("apiVersion", "")),
        check=ks.check_entry(obj, check_names),
        lifecycle=ks.lifecycle(obj),
        holds_quota=ks.holds_quota(obj),
        quota_reserved_since=ks.quota_reserved_since(obj),
        cluster_queue=ks.cluster_queue_of(obj, local_queues or {}),
        record=record,
        workload=workload,
        problem=problem,
    )


@dataclass(frozen=True)
class PodView:
    """One pod carrying our plan-id label (or any pod, for the watch filters)."""

    namespace: str
    name: str
    resource_version: str
    created: str
    plan_id: str | None
    pod_set: str | None
    """Our PodSet label, else Kueue's; None when neither is set."""
    completion_index: int | None
    """An indexed Job's completion index."""
    slot_index: int | None
    """The slot of its placement the pod was pinned to (``optsched.io/pod-index``)."""
    node: str | None
    phase: str
    deleting: bool
    gates: tuple[str, ...]
    """Names of its scheduling gates."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gated_by_us(self) -> bool:
        return SCHEDULING_GATE in self.gates

    @property
    def live(self) -> bool:
        """Not finished and not being deleted: it holds (or will hold) its slot."""
        return self.phase not in TERMINAL_PHASES and not self.deleting

    @property
    def bound(self) -> bool:
        """On a node and not finished: the node's usage already counts it."""
        return self.node is not None and self.phase not in TERMINAL_PHASES


def _index(*sources: Mapping[str, Any], key: str) -> int | None:
    for source in sources:
        raw = source.get(key)
        if isinstance(raw, str) and raw.isdigit():
            return int(raw)
    return None


def read_pod(obj: Mapping[str, Any]) -> PodView:
    """The view of one raw pod; tolerant, as a pod of any shape may come through a watch."""
    m = ks.meta(obj)
    labels, annotations = ks.map_or_empty(m.get("labels")), ks.map_or_empty(m.get("annotations"))
    spec, status = ks.map_or_empty(obj.get("spec")), ks.map_or_empty(obj.get("status"))
    gates = spec.get("schedulingGates") if isinstance(spec.get("schedulingGates"), list) else []
    pod_set = labels.get(PODSET_LABEL) or labels.get(KUEUE_PODSET_LABEL)
    return PodView(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        resource_version=str(m.get("resourceVersion", "")),
        created=str(m.get("creationTimestamp", "")),
        plan_id=str(labels[PLAN_ID_LABEL]) if labels.get(PLAN_ID_LABEL) else None,
        pod_set=str(pod_set) if pod_set else None,
        completion_index=_index(labels, annotations, key=COMPLETION_INDEX_LABEL),
        slot_index=_index(annotations, key=POD_INDEX_ANNOTATION),
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        phase=str(status.get("phase", "")),
        deleting=bool(m.get("deletionTimestamp")),
        gates=tuple(str(g.get("name")) for g in gates or () if isinstance(g, dict)),
    )


def by_plan(pods: Iterable[PodView]) -> dict[str, list[PodView]]:
    """Pods grouped by the plan id they carry (pods without one are left out)."""
    out: dict[str, list[PodView]] = {}
    for pod in pods:
        if pod.plan_id:
            out.setdefault(pod.plan_id, []).append(pod)
    return out
