"""Which MIG GPUs one plan may change: those whose new layouts could serve the most of the queue.

Each change restarts its node's device plugin, and the layout model grows
with every GPU it may change, so a plan changes at most a bounded number of
GPUs (``settings.mig_changeable_gpus``); the rest keep their layouts this
cycle and the planner says so.
"""

from __future__ import annotations

from optsched.capacity.eligibility import flavors_of, placement_verdict
from optsched.capacity.mig_room import gpu_headroom, plannable
from optsched.model.mig import compute_slices
from optsched.model.names import MIG_PREFIX
from optsched.model.snapshot import Node, Snapshot


def most_useful(snapshot: Snapshot, limit: int) -> set[tuple[str, int]]:
    """(node, GPU) of the ``limit`` plannable GPUs whose new layouts could serve the most MIG demand.

    A GPU's worth is the compute slices of the requests its headroom could
    hold, counting only PodSets whose filters (selectors, affinity, flavors,
    taints) its node passes, each profile capped at what they ask. Ties go
    round the nodes (every node's best GPU before any node's second), then by
    node and GPU order, so the choice is the same on every run.
    """
    scored = []
    for number, node in enumerate(snapshot.nodes):
        demand = _demand_on(snapshot, node)
        if not demand:
            continue
        worths = []
        for gpu in plannable(node):
            room = gpu_headroom(gpu)
            worth = sum(
                min(room.get(name, 0), want) * max(1, compute_slices(name)) for name, want in demand.items()
            )
            if worth > 0:
                worths.append((worth, gpu.index))
        for rank, (worth, index) in enumerate(sorted(worths, key=lambda w: (-w[0], w[1]))):
            scored.append((-worth, rank, number, index, node.name))
    return {(name, index) for *_, index, name in sorted(scored)[:limit]}


def _demand_on(snapshot: Snapshot, node: Node) -> dict[str, int]:
    """MIG instances asked by the pending PodSets that may run on ``node``."""
    demand: dict[str, int] = {}
    if not node.ready or node.unschedulable:
        return demand
    for workload in snapshot.workloads:
        for ps in workload.pod_sets:
            mig = {k: v for k, v in ps.request.extended.items() if k.startswith(MIG_PREFIX) and v > 0}
            if not mig:
                continue
            if not any(placement_verdict(node, ps, f).ok for f in flavors_of(snapshot, workload, ps)):
                continue
            for name, amount in mig.items():
                demand[name] = demand.get(name, 0) + amount * ps.count
    return demand
