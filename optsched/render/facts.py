"""Facts every renderer derives the same way from a snapshot and a plan.

GPU occupancy before and after, per-workload shapes, and node grouping live
here so the table, the HTML picture and the comparison never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from optsched.model.names import HOSTNAME_LABEL
from optsched.model.plan import FlavorEligibility, Plan, WorkloadDecision
from optsched.model.snapshot import FULL_GPU_MILLI, Node, PodRequest, Snapshot, Workload
from optsched.render.text import NodeGpus, fmt_gpus


def workloads_by_key(snapshot: Snapshot) -> dict[str, Workload]:
    """Every pending workload by ``namespace/name``, those held by their queues included."""
    return {w.key: w for w in (*snapshot.workloads, *(h.workload for h in snapshot.held))}


def request_of(snapshot_workload: Workload | None, pod_set: str) -> PodRequest | None:
    if snapshot_workload is None:
        return None
    return next((ps.request for ps in snapshot_workload.pod_sets if ps.name == pod_set), None)


def _profile(name: str) -> str:
    """``nvidia.com/mig-1g.10gb`` -> ``mig-1g.10gb``."""
    return "mig-" + name.rsplit("mig-", 1)[-1]


def _mig_slices(amounts: dict[str, int]) -> str:
    """``{"nvidia.com/mig-1g.10gb": 2}`` -> ``2 mig-1g.10gb`` (one slice: the profile alone)."""
    ordered = sorted(amounts.items())
    return "+".join(_profile(name) if n == 1 else f"{n} {_profile(name)}" for name, n in ordered)


def _mig_of(request: PodRequest) -> dict[str, int]:
    return {name: amount for name, amount in request.extended.items() if "mig-" in name and amount > 0}


def shape_text(request: PodRequest) -> str:
    """One pod's GPU ask: ``8``, ``0.25`` (a share), ``2x0.25`` (2 shares), ``2 mig-1g.10gb`` or ``0``.

    A share that asks for memory only reads ``4000MiB`` (or ``50%mem``).
    """
    if request.is_share:
        if request.gpu_milli:
            each = fmt_gpus(request.gpu_milli / FULL_GPU_MILLI)
        elif request.gpu_mem_mib:
            each = f"{request.gpu_mem_mib}MiB"
        else:
            each = f"{request.gpu_mem_percent}%mem"
        return each if request.gpus == 1 else f"{request.gpus}x{each}"
    if request.gpus:
        return fmt_gpus(request.gpu_equivalent)
    mig = _mig_of(request)
    return _mig_slices(mig) if mig else "0"


def needs_text(workload: Workload) -> str:
    """What the gang needs to start: GPUs (shares by fraction) and MIG slices, e.g. ``8 mig-1g.10gb``."""
    slices: dict[str, int] = {}
    for ps in workload.pod_sets:
        for name, amount in _mig_of(ps.request).items():
            slices[name] = slices.get(name, 0) + ps.needed * amount
    gpus = workload.gpu_demand
    mig = " + ".join(f"{n} {_profile(name)}" for name, n in sorted(slices.items()))
    if mig and not gpus:
        return mig
    return f"{fmt_gpus(gpus)} + {mig}" if mig else fmt_gpus(gpus)


def pods_by_gpus(decision: WorkloadDecision, workload: Workload | None) -> str:
    """``2 x 8`` per PodSet (pods x GPUs per pod), joined with ``+`` for several PodSets."""
    parts = []
    if decision.decision == "admit" and decision.pod_sets:
        for ps in decision.pod_sets:
            request = request_of(workload, ps.name)
            shape = shape_text(request) if request else "?"
            parts.append(f"{len(ps.pods)} x {shape}")
    elif workload is not None:
        for pod_set in workload.pod_sets:
            count = pod_set.needed
            parts.append(f"{count} x {shape_text(pod_set.request)}")
    return " + ".join(parts) if parts else "-"


def enforcement_text(decision: WorkloadDecision) -> str:
    """How an admitted workload's GPUs are enforced: ``dra``, or ``dra 2, none 1`` where its pods differ."""
    counts: dict[str, int] = {}
    for ps in decision.pod_sets:
        for pod in ps.pods:
            if pod.enforcement is not None:
                counts[pod.enforcement.value] = counts.get(pod.enforcement.value, 0) + 1
    if len(counts) <= 1:
        return next(iter(counts), "-")
    return ", ".join(f"{value} {n}" for value, n in counts.items())


def node_groups(decision: WorkloadDecision, workload: Workload | None = None) -> list[NodeGpus]:
    """Per node, in first-use order: the GPU indices (or count of unknown ones) a workload takes.

    A pod left to the node counts the GPUs it asks for (a share one): ``[any 2]``
    for a 2-GPU pod, not one per pod.
    """
    order: list[str] = []
    indices: dict[str, set[int]] = defaultdict(set)
    unknown: dict[str, int] = defaultdict(int)
    pods: dict[str, int] = defaultdict(int)
    for ps in decision.pod_sets:
        request = request_of(workload, ps.name)
        devices = request.gpus if request is not None else 1
        for pod in ps.pods:
            if pod.node not in pods:
                order.append(pod.node)
            pods[pod.node] += 1
            if pod.gpus is None:
                unknown[pod.node] += devices
            else:
                indices[pod.node].update(pod.gpus)
    return [
        NodeGpus(node=name, indices=tuple(sorted(indices[name])), unknown=unknown[name], pods=pods[name])
        for name in order
    ]


def group_key(snapshot: Snapshot, node: Node) -> tuple[str, ...]:
    """The node's topology domain above the host (e.g. ``(block, rack)``), coarsest first."""
    levels = snapshot.topologies[0].levels if snapshot.topologies else snapshot.default_topology_levels
    above_host = [level for level in levels if level != HOSTNAME_LABEL]
    return tuple(f"{level.rsplit('/', 1)[-1]}={node.labels.get(level, '?')}" for level in above_host)


@dataclass
class GpuCell:
    """One GPU: what ran before the plan and what the plan adds, in thousandths."""

    index: int
    existing_milli: int = 0
    planned_milli: int = 0
    healthy: bool = True
    planned_by: list[str] = field(default_factory=list)
    """``namespace/name pod-set#index`` for each planned pod on this GPU."""


@dataclass
class NodeCells:
    node: Node
    gpus: list[GpuCell]
    unknown_before: int = 0
    """Whole GPUs in use whose index no pod annotation tells."""
    unknown_planned: int = 0
    """Whole GPUs planned without indices (the node's free indices were unknown)."""
    planned_pods: list[str] = field(default_factory=list)


def occupancy(snapshot: Snapshot, plan: Plan) -> list[NodeCells]:
    """Per node and GPU index: occupancy before the plan and what the plan adds."""
    by_key = workloads_by_key(snapshot)
    cells: dict[str, NodeCells] = {}
    for node in snapshot.nodes:
        usage = snapshot.usage_of(node.name)
        gpus = []
        for index in range(node.gpu_count):
            used = usage.gpu_milli[index] if index < len(usage.gpu_milli) else 0
            gpus.append(
                GpuCell(
                    index=index,
                    existing_milli=min(used, FULL_GPU_MILLI),
                    healthy=index not in node.unhealthy_gpus,
                )
            )
        cells[node.name] = NodeCells(node=node, gpus=gpus, unknown_before=usage.unknown_index_gpus)
    for decision in plan.admitted:
        workload = by_key.get(decision.name)
        for ps in decision.pod_sets:
            request = request_of(workload, ps.name)
            share = request.gpu_milli if request is not None and request.is_share else FULL_GPU_MILLI
            count = request.gpus if request is not None else 0
            for pod in ps.pods:
                target = cells.get(pod.node)
                if target is None:
                    continue
                label = f"{decision.name} {ps.name}#{pod.index}"
                target.planned_pods.append(label)
                if pod.gpus is None:
                    target.unknown_planned += count
                    continue
                for gpu in pod.gpus:
                    if 0 <= gpu < len(target.gpus):
                        target.gpus[gpu].planned_milli += share
                        target.gpus[gpu].planned_by.append(label)
    return list(cells.values())


def _nodes(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


def eligibility_lines(decision: WorkloadDecision) -> list[str]:
    """Why nodes are out of reach for each PodSet, before counting what is free (from the plan).

    Flavors with no eligible node are folded into one line when another flavor
    has some, so a three-flavor queue does not triple the output.
    """
    by_pod_set: dict[str, list[FlavorEligibility]] = {}
    for entry in decision.eligibility:
        by_pod_set.setdefault(entry.pod_set, []).append(entry)
    lines = []
    for pod_set, per_flavor in by_pod_set.items():
        usable = [e for e in per_flavor if e.eligible]
        for entry in usable or per_flavor:
            flavor = f" flavor {entry.flavor}" if entry.flavor is not None else ""
            total = entry.eligible + sum(entry.excluded.values())
            lines.append(f"podset {pod_set}{flavor}: {entry.eligible} of {total} nodes eligible")
            worst = sorted(entry.excluded.items(), key=lambda kv: (-kv[1], kv[0]))
            lines += [f"  excluded {n} node{'s' if n != 1 else ''}: {reason}" for reason, n in worst]
            lines += [
                f"  tolerates {key} taints on {_nodes(n)} "
                f"(ExtendedResourceToleration: the pods request {key})"
                for key, n in sorted(entry.admission_tolerated.items())
            ]
        empty = [e.flavor for e in per_flavor if not e.eligible and e.flavor is not None and usable]
        if empty:
            noun = "flavor" if len(empty) == 1 else "flavors"
            lines.append(f"podset {pod_set}: no eligible node in {noun} {', '.join(empty)}")
    return lines
