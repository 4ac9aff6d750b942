"""Turn a raw :class:`~optsched.model.placement.Placement` into the :class:`~optsched.model.plan.Plan`.

Every policy (the optimizer and each greedy baseline) ends here, so every
plan has the same shape: one decision per pending workload, pods by PodSet
and index, reasons for each deferral, and a summary (GPUs before and after,
fragmentation, stranded GPUs, NVLink and rack locality) that makes policies
comparable on the same snapshot.
"""

from __future__ import annotations

from collections.abc import Collection

from optsched.capacity.eligibility import CandidateCache
from optsched.capacity.fragmentation import Shape, cluster_fragmentation, stranded_gpus, typical_shapes
from optsched.capacity.state import ClusterState
from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, scaled
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS
from optsched.model.placement import Placement, WorkloadAssignment
from optsched.model.plan import (
    Plan,
    PlanStatus,
    PlanSummary,
    PodSetPlacement,
    ProductSummary,
    WorkloadDecision,
)
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest, Snapshot, Workload
from optsched.planning.reasons import BEYOND_WINDOW, PlanContext, explain_deferral
from optsched.topology.domains import rack_level

DEFAULT_RACK_LEVEL = DEFAULT_TOPOLOGY_LEVELS[1]


def pending_requests(snapshot: Snapshot) -> list[PodRequest]:
    """One request per pending pod: the queue whose shapes fragmentation is measured against."""
    return [ps.request for w in snapshot.workloads for ps in w.pod_sets for _ in range(ps.count)]


def apply_placement(snapshot: Snapshot, placement: Placement, state: ClusterState) -> list[str]:
    """Book every admitted pod on ``state``; returns warnings for entries that name unknown things.

    Pods without GPU indices (nodes with index-unknown usage) are booked as
    more index-unknown GPUs, so the free count stays right.
    """
    warnings: list[str] = []
    by_key = {w.key: w for w in snapshot.workloads}
    for key, assignment in placement.admitted.items():
        workload = by_key.get(key)
        if workload is None:
            warnings.append(f"placement admits {key}, which is not a pending workload; ignored")
            continue
        for ps_name, pods in assignment.pods.items():
            pod_set = next((ps for ps in workload.pod_sets if ps.name == ps_name), None)
            if pod_set is None:
                warnings.append(f"placement of {key} names unknown pod set {ps_name}; ignored")
                continue
            req = pod_set.request
            for pod in pods:
                node = state.by_name.get(pod.node)
                if node is None:
                    warnings.append(f"placement of {key} puts a pod on unknown node {pod.node}; ignored")
                    continue
                if pod.gpus is not None:
                    node.take(req, pod.gpus)
                elif req.is_share:
                    node.take(req, node.choose_gpus(req) or [])
                else:
                    node.take(req, [])
                    node.unknown += req.gpus
    return warnings


def quota_after(snapshot: Snapshot, placement: Placement) -> QuotaLedger:
    """ClusterQueue usage once the admitted workloads without a reservation are charged."""
    ledger = QuotaLedger.from_snapshot(snapshot)
    for workload in snapshot.workloads:
        assignment = placement.admitted.get(workload.key)
        if assignment is None or workload.reservation is not None:
            continue
        cq = snapshot.cluster_queue_of(workload)
        if cq is None:
            continue
        for ps in workload.pod_sets:
            flavor = assignment.flavors.get(ps.name)
            pods = assignment.pods.get(ps.name, [])
            if flavor and pods:
                ledger.charge(cq.name, flavor, scaled(pod_quota_amounts(ps.request), len(pods)))
    return ledger


def build_plan(
    snapshot: Snapshot,
    placement: Placement,
    *,
    status: PlanStatus,
    policy: str,
    solve_seconds: float = 0.0,
    objective: dict[str, float] | None = None,
    bound: float | None = None,
    gap: float | None = None,
    warnings: list[str] | None = None,
    beyond_window: Collection[str] = (),
) -> Plan:
    """The plan for ``placement``: decisions in queue order, reasons, summary and warnings."""
    before = ClusterState.from_snapshot(snapshot)
    after = before.copy()
    build_warnings = apply_placement(snapshot, placement, after)
    ordered = sorted(snapshot.workloads, key=lambda w: w.queue_key)
    context = PlanContext(
        state_before=before,
        ledger_after=quota_after(snapshot, placement),
        admitted=[(w, _nodes_of(placement.admitted[w.key])) for w in ordered if w.key in placement.admitted],
        cache=CandidateCache(snapshot),
        admitted_flavors={
            key: frozenset(f for f in assignment.flavors.values() if f)
            for key, assignment in placement.admitted.items()
        },
    )
    decisions = []
    for workload in ordered:
        assignment = placement.admitted.get(workload.key)
        if assignment is not None:
            decisions.append(_admit(workload, assignment))
            continue
        notes = [BEYOND_WINDOW] if workload.key in beyond_window else []
        reasons = notes + [
            r for r in explain_deferral(snapshot, workload, after, context=context) if r not in notes
        ]
        decisions.append(
            WorkloadDecision(name=workload.key, decision="defer", priority=workload.priority, reasons=reasons)
        )
    summary = summarize(snapshot, placement, before, after)
    return Plan(
        status=status,
        policy=policy,
        solve_seconds=solve_seconds,
        objective=dict(objective or {}),
        bound=bound,
        gap=gap,
        workloads=decisions,
        summary=summary,
        warnings=[*snapshot.warnings, *(warnings or []), *build_warnings],
    )


def _nodes_of(assignment: WorkloadAssignment) -> frozenset[str]:
    return frozenset(pod.node for pods in assignment.pods.values() for pod in pods)


def _admit(workload: Workload, assignment: WorkloadAssignment) -> WorkloadDecision:
    pod_sets = []
    gpus = 0.0
    for ps in workload.pod_sets:
        pods = assignment.pods.get(ps.name, [])
        gpus += len(pods) * ps.request.gpu_equivalent
        pod_sets.append(
            PodSetPlacement(
                name=ps.name,
                flavor=assignment.flavors.get(ps.name),
                pods=list(pods),
            )
        )
    return WorkloadDecision(
        name=workload.key,
        decision="admit",
        priority=workload.priority,
        gpus=round(gpus, 3),
        pod_sets=pod_sets,
    )


def _gpus(milli: int) -> float:
    return round(milli / FULL_GPU_MILLI, 3)


def _free(state: ClusterState) -> float:
    """Free GPUs, no node counting below zero (a snapshot may list more in use than a node has)."""
    return _gpus(sum(max(0, node.free_gpu_milli) for node in state.nodes))


def summarize(
    snapshot: Snapshot, placement: Placement, before: ClusterState, after: ClusterState
) -> PlanSummary:
    """Capacity, fragmentation and locality figures of a plan (GPUs count shares by fraction)."""
    shapes = typical_shapes(pending_requests(snapshot))
    total = snapshot.total_gpus
    free_before = _free(before)
    free_after = _free(after)
    pod_sets = {(w.key, ps.name): ps for w in snapshot.workloads for ps in w.pod_sets}
    admitted_keys = [w.key for w in snapshot.workloads if w.key in placement.admitted]
    pods_admitted = 0
    gpus_admitted = 0.0
    multi = 0
    multi_in_island = 0
    racks: list[int] = []
    for key in admitted_keys:
        assignment = placement.admitted[key]
        rack = _rack_label(snapshot, assignment)
        rack_values: set[str] = set()
        gang_pods = 0
        for ps_name, pods in assignment.pods.items():
            pod_set = pod_sets.get((key, ps_name))
            if pod_set is None:
                continue
            for pod in pods:
                gang_pods += 1
                gpus_admitted += pod_set.request.gpu_equivalent
                node = snapshot.node(pod.node)
                rack_values.add(node.labels.get(rack, "") if node is not None else "")
                if pod_set.request.gpus > 1 and not pod_set.request.is_share:
                    multi += 1
                    state = before.by_name.get(pod.node)
                    if pod.gpus is not None and state is not None and state.in_one_island(pod.gpus):
                        multi_in_island += 1
        pods_admitted += gang_pods
        if gang_pods > 1:
            racks.append(len(rack_values))
    return PlanSummary(
        gpus_total=total,
        gpus_allocated_before=round(total - free_before, 3),
        gpus_free_before=free_before,
        gpus_allocated_after=round(total - free_after, 3),
        gpus_free_after=free_after,
        gpus_admitted=round(gpus_admitted, 3),
        fragmentation_before=round(cluster_fragmentation(before, shapes), 3),
        fragmentation_after=round(cluster_fragmentation(after, shapes), 3),
        stranded_gpus_before=stranded_gpus(before, shapes),
        stranded_gpus_after=stranded_gpus(after, shapes),
        workloads_admitted=len(admitted_keys),
        workloads_deferred=len(snapshot.workloads) - len(admitted_keys),
        pods_admitted=pods_admitted,
        multi_gpu_pods=multi,
        multi_gpu_pods_in_one_island=multi_in_island,
        racks_per_gang=round(sum(racks) / len(racks), 3) if racks else 0.0,
        by_product=_by_product(snapshot, before, after, shapes),
    )


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
