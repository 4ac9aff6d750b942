"""The figures that make plans comparable: GPUs before and after, fragmentation, locality.

Every policy's plan gets the same summary from the same snapshot, so "optimizer
vs. BestFit" compares like with like: free and admitted GPUs (shares counted by
fraction), FGD fragmentation and stranded GPUs against the queue's typical
shapes, multi-GPU pods inside one NVLink island, and racks per gang.
"""

from __future__ import annotations

from optsched.capacity.fragmentation import Shape, cluster_fragmentation, counted_shapes, stranded_gpus
from optsched.capacity.state import ClusterState
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS
from optsched.model.placement import Placement, WorkloadAssignment
from optsched.model.plan import PlanSummary, ProductSummary
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest, Snapshot
from optsched.topology.domains import rack_level

DEFAULT_RACK_LEVEL = DEFAULT_TOPOLOGY_LEVELS[1]


def pending_requests(snapshot: Snapshot) -> list[tuple[PodRequest, int]]:
    """Each pending PodSet's request and count: the queue whose shapes fragmentation is measured against."""
    return [(ps.request, ps.count) for w in snapshot.workloads for ps in w.pod_sets]


def _gpus(milli: int) -> float:
    return round(milli / FULL_GPU_MILLI, 3)


def _free(state: ClusterState) -> float:
    """Free GPUs, no node counting below zero (a snapshot may list more in use than a node has)."""
    return _gpus(sum(max(0, node.free_gpu_milli) for node in state.nodes))


def summarize(
    snapshot: Snapshot, placement: Placement, before: ClusterState, after: ClusterState
) -> PlanSummary:
    """Capacity, fragmentation and locality figures of a plan (GPUs count shares by fraction)."""
    shapes = counted_shapes(pending_requests(snapshot))
    total = snapshot.total_gpus
    free_before, free_after = _free(before), _free(after)
    admitted_keys = [w.key for w in snapshot.workloads if w.key in placement.admitted]
    locality = _Locality(snapshot, before)
    for key in admitted_keys:
        locality.add(key, placement.admitted[key])
    return PlanSummary(
        gpus_total=total,
        gpus_allocated_before=round(total - free_before, 3),
        gpus_free_before=free_before,
        gpus_allocated_after=round(total - free_after, 3),
        gpus_free_after=free_after,
        gpus_admitted=round(locality.gpus, 3),
        fragmentation_before=round(cluster_fragmentation(before, shapes), 3),
        fragmentation_after=round(cluster_fragmentation(after, shapes), 3),
        stranded_gpus_before=stranded_gpus(before, shapes),
        stranded_gpus_after=stranded_gpus(after, shapes),
        workloads_admitted=len(admitted_keys),
        workloads_deferred=len(snapshot.workloads) - len(admitted_keys) + len(snapshot.held),
        pods_admitted=locality.pods,
        multi_gpu_pods=locality.multi,
        multi_gpu_pods_in_one_island=locality.multi_in_island,
        racks_per_gang=round(sum(locality.racks) / len(locality.racks), 3) if locality.racks else 0.0,
        by_product=_by_product(snapshot, before, after, shapes),
    )


class _Locality:
    """Pods, GPUs, NVLink-island hits and racks per gang, counted over the admitted workloads."""

    def __init__(self, snapshot: Snapshot, before: ClusterState) -> None:
        self.snapshot = snapshot
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.before = before
        self.pod_sets = {(w.key, ps.name): ps for w in snapshot.workloads for ps in w.pod_sets}
        self.pods = 0
        self.gpus = 0.0
        self.multi = 0
        self.multi_in_island = 0
        self.racks: list[int] = []

    def add(self, key: str, assignment: WorkloadAssignment) -> None:
        rack = _rack_label(self.snapshot, assignment)
        rack_values: set[str] = set()
        gang_pods = 0
        for ps_name, pods in assignment.pods.items():
            pod_set = self.pod_sets.get((key, ps_name))
            if pod_set is None:
                continue
            for pod in pods:
                gang_pods += 1
                self.gpus += pod_set.request.gpu_equivalent
                node = self.nodes.get(pod.node)
                rack_values.add(node.labels.get(rack, "") if node is not None else "")
                if pod_set.request.gpus > 1 and not pod_set.request.is_share:
                    self.multi += 1
                    state = self.before.by_name.get(pod.node)
                    if pod.gpus is not None and state is not None and state.in_one_island(pod.gpus):
                        self.multi_in_island += 1
        self.pods += gang_pods
        if gang_pods > 1:
            self.racks.append(len(rack_values))


def _rack_label(snapshot: Snapshot, assignment: WorkloadAssignment) -> str:
    flavor_name = next((f for f in assignment.flavors.values() if f), None)
    levels = snapshot.topology_levels_for(snapshot.flavor(flavor_name))
    return rack_level(levels) or DEFAULT_RACK_LEVEL


def _by_product(
    snapshot: Snapshot, before: ClusterState, after: ClusterState, shapes: list[Shape]
) -> list[ProductSummary]:
    products: dict[str, list[str]] = {}
    for node in snapshot.nodes:
        if node.gpu_count:
            products.setdefault(node.product or "unknown", []).append(node.name)
    out = []
    for product, names in sorted(products.items()):
        members = set(names)
        sub_before = ClusterState([before.by_name[n] for n in names])
        sub_after = ClusterState([after.by_name[n] for n in names])
        out.append(
            ProductSummary(
                product=product,
                gpus_total=sum(len(n.healthy_gpus) for n in snapshot.nodes if n.name in members),
                gpus_free_before=_free(sub_before),
                gpus_free_after=_free(sub_after),
                fragmentation_before=round(cluster_fragmentation(sub_before, shapes), 3),
                fragmentation_after=round(cluster_fragmentation(sub_after, shapes), 3),
            )
        )
    return out
