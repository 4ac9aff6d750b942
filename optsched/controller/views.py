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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from optsched.controller.records import PlacementRecord, RecordError, record_of
from optsched.errors import InputError
from optsched.kueue import workload_status as ks
from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    GPUS_ANNOTATION,
    JOBSET_JOB_INDEX_LABEL,
    KUEUE_PODSET_LABEL,
    KUEUE_QUEUE_NAME_LABEL,
    PINNED_AT_ANNOTATION,
    PLACEMENT_ANNOTATION,
    PLAN_ID_LABEL,
    POD_CLAIM_NAME,
    POD_INDEX_ANNOTATION,
    PODSET_LABEL,
    SCHEDULING_GATE,
)
from optsched.model.snapshot import CheckState, Workload
from optsched.snapshot.dra_demand import ClaimTemplates
from optsched.snapshot.kueue_objects import parse_workload

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DIRECT_OWNER_KINDS = frozenset({"Job", "Pod"})
"""Integrations whose pods a Workload's owner owns directly (batch Job; plain pods and pod groups).

For these a pod belongs to a Workload only when its controller owner (or
the pod itself) is one of the Workload's owners. Integrations with a
controller in between (JobSet's child Jobs, RayCluster, LeaderWorkerSet's
StatefulSets) are matched by namespace and plan id alone.
"""


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
    """Kueue holds a quota reservation for it and is not evicting it."""
    quota_reserved_since: datetime | None
    cluster_queue: str | None
    """The reservation's ClusterQueue, else the one its LocalQueue points to (None if unknown)."""
    record: PlacementRecord | None
    workload: Workload | None = None
    """The spec as the planner reads it; None where it was not read or is malformed."""
    spec_problem: str | None = None
    """Why the spec cannot be planned, in one line: permanent, the workload is rejected."""
    record_problem: str | None = None
    """Why the placement record cannot be read or trusted, in one line."""
    owners: frozenset[str] = frozenset()
    """Owner uids and ``Kind/name``s, and the Job uid Kueue labels it with: whose pods are its pods."""
    owner_kinds: frozenset[str] = frozenset()
    entries: tuple[ks.CheckEntry, ...] = ()
    """Every entry of ours on the workload (a ClusterQueue may require several checks we serve)."""
    requeue_count: int = 0
    """How often Kueue sent it back: the largest ``retryCount`` of our entries, or
    ``requeueState.count`` where larger; what the backoff doubles on."""
    topology_assigned: bool = False
    """A PodSet carries Kueue TAS's ``topologyAssignment``: TAS places it, so optsched must not."""
    pod_specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each PodSet's pod template spec, as Kueue charged it (the raw object's, not a copy)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    @property
    def problem(self) -> str | None:
        """Why the workload cannot be planned (malformed spec or record), in one line."""
        return self.spec_problem or self.record_problem

    @property
    def strict_owners(self) -> bool:
        """Its pods are owned directly by what owns it (a Job, or the pods themselves)."""
        return bool(self.owner_kinds) and self.owner_kinds <= DIRECT_OWNER_KINDS

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
    templates: ClaimTemplates | None = None,
) -> WorkloadView:
    """The view of one raw Workload; with ``spec``, its spec is parsed for the planner too.

    ``local_queues`` maps ``(namespace, name)`` to a ClusterQueue, for
    workloads without a reservation yet; ``templates`` are the
    ResourceClaimTemplates read, so GPUs asked through them count.
    """
    m = ks.meta(obj)
    problem: str | None = None
    workload: Workload | None = None
    if spec:
        try:
            workload = parse_workload(obj, templates)
        except InputError as exc:
            problem = str(exc)
        except (TypeError, AttributeError, ValueError) as exc:
            problem = f"{ks.key_of(obj)}: unreadable ({exc})"
    problem = problem or _template_problem(obj)
    record, record_problem = _record(obj)
    status = ks.map_or_empty(obj.get("status"))
    entries = ks.check_entries(obj, check_names)
    return WorkloadView(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        uid=str(m.get("uid", "")),
        resource_version=str(m.get("resourceVersion", "")),
        api_version=str(obj.get("apiVersion", "")),
        check=entries[0] if entries else None,
        lifecycle=ks.lifecycle(obj),
        holds_quota=ks.holds_quota(obj) and not ks.is_evicted(obj),
        quota_reserved_since=ks.quota_reserved_since(obj),
        cluster_queue=ks.cluster_queue_of(obj, local_queues or {}),
        record=record,
        workload=workload,
        spec_problem=problem,
        record_problem=record_problem,
        owners=ks.owners_of(obj),
        owner_kinds=frozenset(
            str(r.get("kind", "")) for r in ks.list_or_empty(m.get("ownerReferences")) if isinstance(r, dict)
        ),
        entries=entries,
        requeue_count=max(
            _count(ks.map_or_empty(status.get("requeueState")).get("count")),
            max((e.retry_count for e in entries), default=0),
        ),
        topology_assigned=_topology_assigned(status),
        pod_specs=_pod_specs(obj),
    )


def _pod_specs(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for pod_set in ks.list_or_empty(ks.map_or_empty(obj.get("spec")).get("podSets")):
        raw = ks.map_or_empty(pod_set)
        out[str(raw.get("name", ""))] = ks.map_or_empty(ks.map_or_empty(raw.get("template")).get("spec"))
    return out


def _record(obj: dict[str, Any]) -> tuple[PlacementRecord | None, str | None]:
    """The record and, when it cannot be used, why (malformed, or not what its plan id says)."""
    try:
        record = record_of(obj)
    except RecordError as exc:
        return None, str(exc)
    if record is not None and not record.verified(str(ks.meta(obj).get("uid", ""))):
        return None, f"annotation {PLACEMENT_ANNOTATION} was changed: its plan id does not match its slots"
    return record, None


OPTSCHED_POD_ANNOTATIONS = (GPUS_ANNOTATION, POD_INDEX_ANNOTATION)
"""Written by optsched when it pins a pod; the shipped policy refuses pods created with them."""


def _template_problem(obj: Mapping[str, Any]) -> str | None:
    """A PodSet whose template carries optsched's own pod annotations: its pods could never be created."""
    for i, pod_set in enumerate(ks.list_or_empty(ks.map_or_empty(obj.get("spec")).get("podSets"))):
        template = ks.map_or_empty(ks.map_or_empty(pod_set).get("template"))
        annotations = ks.map_or_empty(ks.meta(template).get("annotations"))
        found = [k for k in OPTSCHED_POD_ANNOTATIONS if k in annotations]
        if found:
            return (
                f"{ks.key_of(obj)}: field spec.podSets[{i}].template.metadata.annotations: "
                f"{', '.join(found)} may only be written by optsched when it pins a pod; "
                "remove them from the pod template"
            )
    return None


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def _topology_assigned(status: Mapping[str, Any]) -> bool:
    admission = ks.map_or_empty(status.get("admission"))
    return any(
        isinstance(a, dict) and a.get("topologyAssignment")
        for a in ks.list_or_empty(admission.get("podSetAssignments"))
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
    uid: str = ""
    owners: frozenset[str] = frozenset()
    """Its owners' uids and ``Kind/name``s."""
    queue_name: str | None = None
    """``kueue.x-k8s.io/queue-name``: set on pods of pod-based integrations."""
    unschedulable_since: datetime | None = None
    """When kube-scheduler last found no node for it (``PodScheduled=False``, ``Unschedulable``)."""
    pinned_at: datetime | None = None
    """When optsched pinned it (``optsched.io/pinned-at``)."""
    claim_name: str | None = None
    """The ResourceClaim of its ``optsched-gpus`` entry: the webhook moved its GPUs onto it."""
    claim_containers: tuple[tuple[str, str], ...] = ()
    """The containers that refer to the ``optsched-gpus`` entry: (container name, the request it names)."""
    claim_entries: frozenset[str] = frozenset()
    """Names of its ``spec.resourceClaims`` entries."""
    job_index: int | None = None
    """A JobSet pod's child Job index (``jobset.sigs.k8s.io/job-index``)."""

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
        if isinstance(raw, str) and raw.isascii() and raw.isdigit():  # "²".isdigit(), yet int() refuses it
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
        job_index=_index(labels, annotations, key=JOBSET_JOB_INDEX_LABEL),
        slot_index=_index(annotations, key=POD_INDEX_ANNOTATION),
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        phase=str(status.get("phase", "")),
        deleting=bool(m.get("deletionTimestamp")),
        gates=tuple(str(g.get("name")) for g in gates or () if isinstance(g, dict)),
        uid=str(m.get("uid", "")),
        owners=ks.owners_of(obj),
        queue_name=str(labels[KUEUE_QUEUE_NAME_LABEL]) if labels.get(KUEUE_QUEUE_NAME_LABEL) else None,
        unschedulable_since=_unschedulable_since(obj),
        pinned_at=ks.parse_time(annotations.get(PINNED_AT_ANNOTATION)),
        claim_name=_claim_name(spec),
        claim_containers=_claim_containers(spec),
        claim_entries=frozenset(
            str(e.get("name")) for e in ks.list_or_empty(spec.get("resourceClaims")) if isinstance(e, dict)
        ),
    )


def _claim_containers(spec: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    out = []
    for container in ks.list_or_empty(spec.get("containers")):
        resources = ks.map_or_empty(ks.map_or_empty(container).get("resources"))
        for ref in ks.list_or_empty(resources.get("claims")):
            if isinstance(ref, dict) and ref.get("name") == POD_CLAIM_NAME:
                out.append((str(ks.map_or_empty(container).get("name", "")), str(ref.get("request", ""))))
    return tuple(out)


def _claim_name(spec: Mapping[str, Any]) -> str | None:
    for entry in ks.list_or_empty(spec.get("resourceClaims")):
        if isinstance(entry, dict) and entry.get("name") == POD_CLAIM_NAME and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    return None


def _unschedulable_since(pod: Mapping[str, Any]) -> datetime | None:
    cond = ks.condition(pod, "PodScheduled")
    if cond is None or cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
        return None
    return ks.parse_time(cond.get("lastTransitionTime"))


def belongs(pod: PodView, view: WorkloadView) -> bool:
    """Whether ``pod`` is one of the workload's pods: same namespace and plan, and owned by its owner.

    The plan id alone is readable by anyone who may view the Workload, so it
    never suffices across namespaces; where the workload's owner owns its pods
    directly, the pod's owner (or the pod itself) must be one of the
    workload's owners too.
    """
    if view.record is None or pod.namespace != view.namespace or pod.plan_id != view.record.plan_id:
        return False
    if not view.strict_owners:
        return True
    return pod.uid in view.owners or f"Pod/{pod.name}" in view.owners or bool(pod.owners & view.owners)


def pod_set_in(pod: PodView, record: PlacementRecord) -> str | None:
    """The pod's PodSet in ``record``: its label, else the record's only PodSet (None if neither)."""
    if pod.pod_set is None and len(record.pod_sets) == 1:
        return next(iter(record.pod_sets))
    return pod.pod_set


def pods_of(view: WorkloadView, pods: Mapping[tuple[str, str], Sequence[PodView]]) -> list[PodView]:
    """The workload's pods among ``pods`` (as :func:`by_plan` groups them)."""
    if view.record is None:
        return []
    return [p for p in pods.get((view.namespace, view.record.plan_id), []) if belongs(p, view)]


def by_plan(pods: Iterable[PodView]) -> dict[tuple[str, str], list[PodView]]:
    """Pods grouped by namespace and the plan id they carry (pods without one are left out)."""
    out: dict[tuple[str, str], list[PodView]] = {}
    for pod in pods:
        if pod.plan_id:
            out.setdefault((pod.namespace, pod.plan_id), []).append(pod)
    return out
