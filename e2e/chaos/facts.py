"""What the invariant checker knows about the cluster: raw API objects turned into small frozen facts.

The checker is independent of the controller it judges: it reads raw Pods,
Nodes, Workloads and ClusterQueues through its own client and interprets them
here, from the documented names and formats only (labels, annotations, Kueue's
status fields), never through optsched's own readers. Every parser is
tolerant: a field that is missing or malformed gives the fact's neutral value
(no indices, not ready, no record), so one odd object never stops the soak.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

GPU = "nvidia.com/gpu"
GATE = "optsched.io/placement"
PLACEMENT = "optsched.io/placement"
PLAN_ID = "optsched.io/plan-id"
PODSET = "optsched.io/podset"
POD_INDEX = "optsched.io/pod-index"
GPUS = "optsched.io/gpus"
TOPOLOGY = "optsched.io/gpu-topology"
HOSTNAME = "kubernetes.io/hostname"
QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_PODSET = "kueue.x-k8s.io/podset"
PRODUCT = "nvidia.com/gpu.product"
DEFAULT_POD_SET = "main"
TERMINAL = ("Succeeded", "Failed")
BLOCKING_TAINTS = ("NoSchedule", "NoExecute")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def quantity(value: Any) -> int:
    """A whole-number quantity such as ``"8"`` or ``8``; 0 when it is anything else."""
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        try:
            return max(0, int(float(str(value).strip())))
        except ValueError:
            return 0


def indices(text: Any) -> tuple[int, ...] | None:
    """``"0,1,3"`` as (0, 1, 3); None when absent or not a list of non-negative integers."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        out = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        return None
    return out if all(i >= 0 for i in out) else None


def _gpu_of(container: Any) -> int:
    resources = _dict(_dict(container).get("resources"))
    limits, requests = _dict(resources.get("limits")), _dict(resources.get("requests"))
    return quantity(requests.get(GPU, limits.get(GPU, 0)))


def gpu_request(spec: Mapping[str, Any]) -> int:
    """Whole GPUs a pod holds, as kube-scheduler counts an extended resource (init containers run alone)."""
    main = sum(_gpu_of(c) for c in _list(spec.get("containers")))
    init = max((_gpu_of(c) for c in _list(spec.get("initContainers"))), default=0)
    return max(main, init)


@dataclass(frozen=True)
class PodFact:
    uid: str
    namespace: str
    name: str
    node: str | None
    phase: str
    deleting: bool
    gpus: int
    indices: tuple[int, ...] | None
    pinned_to: str | None
    """Where a pin sends the pod: ``nodeSelector kubernetes.io/hostname``, else a required node affinity
    on the hostname label or on ``metadata.name`` that names one node (a label value or a node name)."""
    plan_id: str | None
    pod_set: str
    pod_index: int | None
    gated: bool
    """Carries optsched's scheduling gate."""
    owners: tuple[str, ...]
    queue: str | None
    scheduled: bool = True
    """Bound by a scheduler (through the ``binding`` subresource), not created with ``spec.nodeName``."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def live(self) -> bool:
        return self.phase not in TERMINAL

    @property
    def bound(self) -> bool:
        return self.live and self.node is not None


def _affinity_pin(spec: Mapping[str, Any]) -> str | None:
    """The one node a required node affinity allows, by hostname label or by name; None otherwise."""
    required = _dict(
        _dict(_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    named = set()
    for term in _list(required.get("nodeSelectorTerms")):
        for part, key in (("matchFields", "metadata.name"), ("matchExpressions", HOSTNAME)):
            for rule in _list(_dict(term).get(part)):
                rule = _dict(rule)
                values = _list(rule.get("values"))
                if rule.get("key") == key and rule.get("operator") == "In" and len(values) == 1:
                    named.add(str(values[0]))
    return named.pop() if len(named) == 1 else None


def pod_fact(raw: Mapping[str, Any]) -> PodFact:
    md, spec, status = _dict(raw.get("metadata")), _dict(raw.get("spec")), _dict(raw.get("status"))
    labels, annotations = _dict(md.get("labels")), _dict(md.get("annotations"))
    index = annotations.get(POD_INDEX)
    return PodFact(
        uid=str(md.get("uid", "")),
        namespace=str(md.get("namespace", "")),
        name=str(md.get("name", "")),
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(md.get("deletionTimestamp")),
        gpus=gpu_request(spec),
        indices=indices(annotations.get(GPUS)),
        pinned_to=_dict(spec.get("nodeSelector")).get(HOSTNAME) or _affinity_pin(spec),
        plan_id=labels.get(PLAN_ID) or None,
        pod_set=str(labels.get(PODSET) or labels.get(KUEUE_PODSET) or DEFAULT_POD_SET),
        pod_index=int(index) if isinstance(index, str) and index.isdigit() else None,
        gated=any(_dict(g).get("name") == GATE for g in _list(spec.get("schedulingGates"))),
        owners=tuple(str(_dict(o).get("uid", "")) for o in _list(md.get("ownerReferences"))),
        queue=labels.get(QUEUE) or None,
        scheduled=not spec.get("nodeName")
        or any(_dict(m).get("subresource") == "binding" for m in _list(md.get("managedFields"))),
    )


@dataclass(frozen=True)
class NodeFact:
    name: str
    allocatable: int
    capacity: int
    unhealthy: frozenset[int]
    ready: bool
    schedulable: bool
    """Not cordoned and without a NoSchedule or NoExecute taint."""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def usable(self) -> int:
        """GPUs a new pod may get: allocatable, less unhealthy GPUs allocatable still counts."""
        healthy = self.capacity - len({i for i in self.unhealthy if i < self.capacity})
        return max(0, min(self.allocatable, healthy))

    @property
    def product(self) -> str | None:
        return self.labels.get(PRODUCT)

    def pinned_here(self, pod: PodFact) -> bool:
        """The pod's pin names this node, by name or by its hostname label."""
        return pod.pinned_to is not None and pod.pinned_to in (self.name, self.labels.get(HOSTNAME))


def _unhealthy(annotations: Mapping[str, Any]) -> frozenset[int]:
    try:
        doc = json.loads(str(annotations.get(TOPOLOGY) or "{}"))
    except ValueError:
        return frozenset()
    found = _list(_dict(doc).get("unhealthy"))
    return frozenset(i for i in found if isinstance(i, int) and i >= 0)


def node_fact(raw: Mapping[str, Any]) -> NodeFact:
    md, spec, status = _dict(raw.get("metadata")), _dict(raw.get("spec")), _dict(raw.get("status"))
    ready = any(
        _dict(c).get("type") == "Ready" and _dict(c).get("status") == "True"
        for c in _list(status.get("conditions"))
    )
    tainted = any(_dict(t).get("effect") in BLOCKING_TAINTS for t in _list(spec.get("taints")))
    return NodeFact(
        name=str(md.get("name", "")),
        allocatable=quantity(_dict(status.get("allocatable")).get(GPU, 0)),
        capacity=quantity(_dict(status.get("capacity")).get(GPU, 0)),
        unhealthy=_unhealthy(_dict(md.get("annotations"))),
        ready=ready,
        schedulable=not spec.get("unschedulable") and not tainted,
        labels={str(k): str(v) for k, v in _dict(md.get("labels")).items()},
    )


@dataclass(frozen=True)
class Slot:
    pod_set: str
    index: int
    node: str
    gpus: tuple[int, ...] | None


@dataclass(frozen=True)
class RecordFact:
    """The placement record optsched keeps on a Workload (its ``optsched.io/placement`` annotation)."""

    plan_id: str
    slots: tuple[Slot, ...]

    def slot(self, pod_set: str, index: int | None) -> Slot | None:
        return next((s for s in self.slots if s.pod_set == pod_set and s.index == index), None)


def record_fact(text: Any) -> RecordFact | None:
    """The record as documented (``{"planId", "podSets": {name: [{index, node, gpus}]}}``), or None."""
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("planId"), str):
        return None
    slots = []
    for pod_set, entries in _dict(doc.get("podSets")).items():
        for entry in _list(entries):
            entry = _dict(entry)
            gpus = entry.get("gpus")
            if isinstance(entry.get("index"), int) and isinstance(entry.get("node"), str):
                listed = tuple(g for g in _list(gpus) if isinstance(g, int)) if gpus is not None else None
                slots.append(Slot(str(pod_set), entry["index"], entry["node"], listed))
    return RecordFact(doc["planId"], tuple(slots))


@dataclass(frozen=True)
class WorkloadFact:
    uid: str
    namespace: str
    name: str
    owners: tuple[str, ...]
    priority: int
    quota_reserved: bool
    admitted: bool
    finished: str | None
    """The Finished condition's reason when it is True."""
    evicted: str | None
    """The Evicted condition's reason when it is True."""
    preempted: bool
    check_state: str | None
    record: RecordFact | None
    admitted_pods: int | None
    """Pods Kueue reserved quota for (``podSetAssignments[].count``), when known."""
    requeue: str = ""
    """Kueue's requeue state, for messages."""
    inactive: bool = False
    """Deactivated (``spec.active: false``) or our check Rejected it: it will not run, by decision."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _condition(status: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in _list(status.get("conditions")):
        if _dict(c).get("type") == ctype and _dict(c).get("status") == "True":
            return _dict(c)
    return None


def workload_fact(raw: Mapping[str, Any], check: str) -> WorkloadFact:
    md, spec, status = _dict(raw.get("metadata")), _dict(raw.get("spec")), _dict(raw.get("status"))
    entry = next(
        (_dict(e) for e in _list(status.get("admissionChecks")) if _dict(e).get("name") == check), {}
    )
    assignments = _list(_dict(status.get("admission")).get("podSetAssignments"))
    counts = [_dict(a).get("count") for a in assignments]
    finished, evicted = _condition(status, "Finished"), _condition(status, "Evicted")
    return WorkloadFact(
        uid=str(md.get("uid", "")),
        namespace=str(md.get("namespace", "")),
        name=str(md.get("name", "")),
        owners=tuple(str(_dict(o).get("uid", "")) for o in _list(md.get("ownerReferences"))),
        priority=quantity(spec.get("priority", 0)),
        quota_reserved=_condition(status, "QuotaReserved") is not None,
        admitted=_condition(status, "Admitted") is not None,
        finished=str(finished.get("reason") or "Finished") if finished else None,
        evicted=str(evicted.get("reason") or "Evicted") if evicted else None,
        preempted=_condition(status, "Preempted") is not None
        or bool(evicted and evicted.get("reason") == "Preempted"),
        check_state=str(entry["state"]) if entry.get("state") else None,
        record=record_fact(_dict(md.get("annotations")).get(PLACEMENT)),
        admitted_pods=sum(quantity(c) for c in counts)
        if counts and all(c is not None for c in counts)
        else None,
        requeue=json.dumps(status["requeueState"]) if isinstance(status.get("requeueState"), dict) else "",
        inactive=spec.get("active") is False or entry.get("state") == "Rejected",
    )


@dataclass(frozen=True)
class Quota:
    """GPUs of the soak's ClusterQueue: its nominal quota and what Kueue has reserved of it."""

    nominal: int
    reserved: int

    @property
    def free(self) -> int:
        return max(0, self.nominal - self.reserved)


def quota_fact(raw: Mapping[str, Any] | None) -> Quota:
    spec, status = _dict(_dict(raw).get("spec")), _dict(_dict(raw).get("status"))
    nominal = sum(
        quantity(_dict(r).get("nominalQuota"))
        for group in _list(spec.get("resourceGroups"))
        for flavor in _list(_dict(group).get("flavors"))
        for r in _list(_dict(flavor).get("resources"))
        if _dict(r).get("name") == GPU
    )
    reserved = sum(
        quantity(_dict(r).get("total"))
        for flavor in _list(status.get("flavorsReservation"))
        for r in _list(_dict(flavor).get("resources"))
        if _dict(r).get("name") == GPU
    )
    return Quota(nominal, reserved)


@dataclass(frozen=True)
class Observation:
    """One consistent-enough look at the cluster: everything the rules judge, at one moment."""

    at: float
    """Seconds since the soak started."""
    pods: tuple[PodFact, ...]
    nodes: Mapping[str, NodeFact]
    workloads: tuple[WorkloadFact, ...]
    quota: Quota
    failed_jobs: frozenset[str] = frozenset()
    """uids of Jobs whose Failed condition is True."""
    alive_owners: frozenset[str] | None = None
    """uids of the Jobs (not being deleted) and live Pods that exist: what a Workload can still run for."""

    def pods_on(self, node: str) -> list[PodFact]:
        return [p for p in self.pods if p.bound and p.node == node]


def observation(
    at: float,
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    workloads: Iterable[Mapping[str, Any]],
    cluster_queue: Mapping[str, Any] | None,
    jobs: Iterable[Mapping[str, Any]],
    check: str,
) -> Observation:
    """An :class:`Observation` from raw lists as the API server returns them."""
    failed = frozenset(
        str(_dict(j.get("metadata")).get("uid", ""))
        for j in jobs
        if _condition(_dict(j.get("status")), "Failed") is not None
    )
    node_facts = {n.name: n for n in (node_fact(raw) for raw in nodes)}
    pod_facts = tuple(pod_fact(p) for p in pods)
    alive = {
        str(_dict(j.get("metadata")).get("uid", ""))
        for j in jobs
        if not _dict(j.get("metadata")).get("deletionTimestamp")
    }
    alive |= {p.uid for p in pod_facts if p.live and not p.deleting}
    return Observation(
        at=at,
        pods=pod_facts,
        nodes=node_facts,
        workloads=tuple(workload_fact(w, check) for w in workloads),
        quota=quota_fact(cluster_queue),
        failed_jobs=failed,
        alive_owners=frozenset(alive),
    )
