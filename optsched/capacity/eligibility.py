"""Which nodes a PodSet may run on, and in words why not.

kube-scheduler's node filters (nodeSelector, required node affinity, taints
and tolerations, readiness) plus Kueue's flavor restrictions (the flavor's
``nodeLabels`` and ``nodeTaints``), then whether one pod fits the node at all
(GPUs, GPU memory, NVLink island size, MIG slices, CPU, memory, pod slots).
The solver and every greedy policy use these answers; ``check_plan``
re-derives its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from optsched.capacity.mig_room import potential_extended
from optsched.model.snapshot import (
    GpuMode,
    Node,
    PodSet,
    ResourceFlavor,
    Snapshot,
    Taint,
    Toleration,
    Workload,
)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""


def _untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def flavors_of(snapshot: Snapshot, workload: Workload, pod_set: PodSet) -> list[ResourceFlavor | None]:
    """Flavors a PodSet may use: its reservation's, else those its ClusterQueue offers for GPUs.

    ``[None]`` means no flavor restriction (no ClusterQueue or no flavors known).
    """
    if workload.reservation is not None:
        chosen = workload.reservation.flavors.get(pod_set.name, {})
        names = sorted(set(chosen.values()))
        if names:
            return [snapshot.flavor(n) or ResourceFlavor(name=n) for n in names[:1]]
    cq = snapshot.cluster_queue_of(workload)
    if cq is None:
        return [None]
    resource = "nvidia.com/gpu" if pod_set.request.gpus else "cpu"
    offered = cq.flavors_for(resource) or cq.flavors_for("cpu")
    if not offered:
        return [None]
    return [snapshot.flavor(f.name) or ResourceFlavor(name=f.name) for f in offered]


def node_verdict(node: Node, pod_set: PodSet, flavor: ResourceFlavor | None) -> Verdict:
    """Can pods of ``pod_set`` ever run on ``node`` (ignoring what is free now)?"""
    if not node.ready:
        return Verdict(False, "node not Ready")
    if node.unschedulable:
        return Verdict(False, "node cordoned")
    verdict = placement_verdict(node, pod_set, flavor)
    return size_verdict(node, pod_set) if verdict.ok else verdict


def placement_verdict(node: Node, pod_set: PodSet, flavor: ResourceFlavor | None) -> Verdict:
    """The filters that neither weigh the pod nor change with time: selectors, affinity, flavor, taints.

    Node taints are checked against the template's tolerations, the flavor's
    and those the cluster's admission adds to the pods
    (:attr:`PodSet.admission_tolerations`); a flavor's ``nodeTaints`` only
    against the template's, as Kueue checks them before any pod exists.
    """
    labels = node.labels
    for key, value in pod_set.node_selector.items():
        if labels.get(key) != value:
            return Verdict(False, f"nodeSelector {key}={value}")
    if pod_set.affinity_terms and not any(t.matches(labels) for t in pod_set.affinity_terms):
        return Verdict(False, "required node affinity")
    tolerations = pod_set.tolerations + pod_set.admission_tolerations
    if flavor is not None:
        for key, value in flavor.node_labels.items():
            if labels.get(key) != value:
                return Verdict(False, f"flavor {flavor.name} label {key}={value}")
        tolerations = tolerations + flavor.tolerations
        taint = _untolerated(flavor.node_taints, pod_set.tolerations)
        if taint is not None:
            return Verdict(False, f"flavor {flavor.name} taint {taint.key}:{taint.effect}")
    taint = _untolerated(node.taints, tolerations)
    if taint is not None:
        value = f"={taint.value}" if taint.value else ""
        return Verdict(False, f"taint {taint.key}{value}:{taint.effect}")
    return Verdict(True)


def size_verdict(node: Node, pod_set: PodSet) -> Verdict:
    """Is the node big enough for one pod at all: GPUs, GPU memory, island, MIG slices, CPU, memory, slots."""
    request = pod_set.request
    if request.dra_gpus and node.gpu_mode != GpuMode.DRA:
        return Verdict(False, "GPUs asked through a ResourceClaimTemplate need a DRA node")
    if request.gpus:
        healthy = len(node.healthy_gpus)
        if healthy == 0:
            return Verdict(False, "no healthy GPU")
        if request.gpus > healthy:
            return Verdict(False, f"has {healthy} healthy GPUs, pod needs {request.gpus}")
        if request.gpu_mem_mib and node.gpu_memory_mib and request.gpu_mem_mib > node.gpu_memory_mib:
            return Verdict(False, f"GPU memory {node.gpu_memory_mib} MiB < {request.gpu_mem_mib} MiB")
        if pod_set.nvlink_required and not request.is_share and request.gpus > node.largest_island:
            return Verdict(False, f"largest NVLink island has {node.largest_island} GPUs")
    extended = potential_extended(node) if request.extended else node.extended
    for name, amount in request.extended.items():
        have = extended.get(name, 0)
        if have < amount:
            return Verdict(False, f"has {have} {name}, pod needs {amount}" if have else f"no {name}")
    if request.cpu_milli > node.cpu_milli:
        return Verdict(False, "CPU allocatable too small")
    if request.memory_mib > node.memory_mib:
        return Verdict(False, "memory allocatable too small")
    if node.max_pods < 1:
        return Verdict(False, "no pod slots")
    return Verdict(True)


def admission_tolerated(node: Node, pod_set: PodSet, flavor: ResourceFlavor | None) -> list[str]:
    """Keys of the node's taints that only the admission-added tolerations tolerate."""
    if not pod_set.admission_tolerations:
        return []
    own = pod_set.tolerations + (flavor.tolerations if flavor is not None else ())
    return [
        taint.key
        for taint in node.taints
        if taint.effect != "PreferNoSchedule"
        and not any(t.tolerates(taint) for t in own)
        and any(t.tolerates(taint) for t in pod_set.admission_tolerations)
    ]


@dataclass(frozen=True)
class Candidates:
    """Nodes a PodSet may use (per flavor) and a count of why the others are excluded."""

    flavor: ResourceFlavor | None
    nodes: tuple[Node, ...]
    excluded: dict[str, int]
    admission_tolerated: dict[str, int] = field(default_factory=dict)
    """Taint key -> eligible nodes whose taint with that key only the admission-added tolerations pass."""


def candidates(snapshot: Snapshot, workload: Workload, pod_set: PodSet) -> list[Candidates]:
    """Eligible nodes per allowed flavor, in flavor order."""
    return [_eligible(snapshot, flavor, pod_set) for flavor in flavors_of(snapshot, workload, pod_set)]


def _eligible(snapshot: Snapshot, flavor: ResourceFlavor | None, pod_set: PodSet) -> Candidates:
    ok: list[Node] = []
    excluded: dict[str, int] = {}
    tolerated: dict[str, int] = {}
    for node in snapshot.nodes:
        verdict = node_verdict(node, pod_set, flavor)
        if verdict.ok:
            ok.append(node)
            for key in admission_tolerated(node, pod_set, flavor):
                tolerated[key] = tolerated.get(key, 0) + 1
        else:
            excluded[verdict.reason] = excluded.get(verdict.reason, 0) + 1
    return Candidates(flavor, tuple(ok), excluded, tolerated)


class CandidateCache:
    """:func:`candidates` memoised by everything node filtering depends on.

    Thousands of queued pods share a few shapes and selectors; filtering every
    node once per shape instead of once per workload keeps the greedy
    baselines and the deferral reasons linear in the cluster size.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._memo: dict[Hashable, list[Candidates]] = {}

    def get(self, workload: Workload, ps: PodSet) -> list[Candidates]:
        """Eligible nodes of ``ps`` per flavor its workload may use."""
        return self.for_flavors(flavors_of(self.snapshot, workload, ps), ps)

    def for_flavors(self, flavors: list[ResourceFlavor | None], ps: PodSet) -> list[Candidates]:
        """Eligible nodes of ``ps`` per flavor of ``flavors``, in their order."""
        key = eligibility_key(flavors, ps)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = [_eligible(self.snapshot, flavor, ps) for flavor in flavors]
        return hit


def eligibility_key(flavors: list[ResourceFlavor | None], ps: PodSet) -> Hashable:
    """Everything :func:`node_verdict` reads of a PodSet and its flavors (names stand for flavors)."""
    req = ps.request
    return (
        tuple(f.name if f is not None else None for f in flavors),
        tuple(sorted(ps.node_selector.items())),
        ps.affinity_terms,
        ps.tolerations,
        ps.admission_tolerations,
        ps.nvlink_required,
        (req.cpu_milli, req.memory_mib, req.gpus, req.gpu_mem_mib, req.is_share, req.dra_gpus),
        tuple(sorted(req.extended.items())),
    )
