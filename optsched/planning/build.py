"""Turn a raw :class:`~optsched.model.placement.Placement` into the :class:`~optsched.model.plan.Plan`.

Every policy (the optimizer and each greedy baseline) ends here, so every
plan has the same shape: one decision per pending workload in queue order,
pods by PodSet and index with their GPUs' UUIDs and enforcement
(:mod:`optsched.planning.enforcement`), reasons for each deferral with the node-filter
diagnosis behind them, and a summary (:mod:`optsched.planning.summary`) that
makes policies comparable on the same snapshot.
"""

from __future__ import annotations

from collections.abc import Collection

from optsched.capacity.baseline import Baseline
from optsched.capacity.eligibility import CandidateCache
from optsched.capacity.state import ClusterState
from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, scaled
from optsched.model.placement import Placement, WorkloadAssignment
from optsched.model.plan import (
    Decision,
    FlavorEligibility,
    Plan,
    PlanStatus,
    PodSetPlacement,
    WorkloadDecision,
)
from optsched.model.snapshot import Node, Snapshot, Workload
from optsched.planning.enforcement import count_enforcement, enforced
from optsched.planning.mig_changes import book_layouts
from optsched.planning.reasons import PlanContext, beyond_window_reason, explain_deferral
from optsched.planning.summary import summarize


def apply_placement(snapshot: Snapshot, placement: Placement, state: ClusterState) -> list[str]:
    """Book every admitted pod on ``state``; returns warnings for entries that name unknown things.

    Pods without GPU indices (left to the node) are booked as more GPUs of
    unknown index, a share as a whole one, so the free count stays right.
    """
    warnings: list[str] = []
    by_key = {w.key: w for w in snapshot.workloads}
    for key, assignment in placement.admitted.items():
        workload = by_key.get(key)
        if workload is None:
            warnings.append(f"the policy admitted {key}, which is not a pending workload; not in the plan")
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
                node.take(req, pod.gpus or ())
    return warnings


def quota_after(snapshot: Snapshot, placement: Placement, before: QuotaLedger) -> QuotaLedger:
    """ClusterQueue usage once the admitted workloads without a reservation are charged."""
    ledger = before.copy()
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
    baseline: Baseline | None = None,
) -> Plan:
    """The plan for ``placement``: decisions in queue order, reasons, summary and warnings."""
    base = Baseline.reuse(snapshot, baseline)
    after = base.state.copy()
    changes, waiting = book_layouts(snapshot, placement, base.state, after)
    build_warnings = apply_placement(snapshot, placement, after)
    ordered = sorted(snapshot.workloads, key=lambda w: w.queue_key)
    context = _context(snapshot, placement, base, ordered)
    decisions = []
    nodes = {node.name: node for node in snapshot.nodes}
    for workload in ordered:
        eligibility = _eligibility(base.eligibility, workload)
        assignment = placement.admitted.get(workload.key)
        if assignment is not None:
            decisions.append(_admit(workload, assignment, eligibility, nodes, waiting.get(workload.key, [])))
            continue
        reasons = explain_deferral(snapshot, workload, after, context=context)
        if workload.key in beyond_window:
            reasons = [beyond_window_reason(), *reasons]
        decisions.append(
            WorkloadDecision(
                name=workload.key,
                decision=Decision.DEFER,
                priority=workload.priority,
                reasons=reasons,
                eligibility=eligibility,
            )
        )
    return Plan(
        status=status,
        policy=policy,
        solve_seconds=solve_seconds,
        objective=dict(objective or {}),
        bound=bound,
        gap=gap,
        workloads=_with_held(snapshot, decisions),
        mig_changes=changes,
        summary=summarize(snapshot, placement, base.state, after).model_copy(
            update={
                "enforcement": count_enforcement(
                    pod for d in decisions for ps in d.pod_sets for pod in ps.pods
                )
            }
        ),
        warnings=[*snapshot.warnings, *(warnings or []), *build_warnings],
    )


def _context(
    snapshot: Snapshot, placement: Placement, base: Baseline, ordered: list[Workload]
) -> PlanContext:
    """What the reasons need to know of the plan: capacity before, quota before and after, admissions."""
    return PlanContext(
        state_before=base.state,
        ledger_before=base.ledger,
        ledger_after=quota_after(snapshot, placement, base.ledger),
        admitted=[(w, _nodes_of(placement.admitted[w.key])) for w in ordered if w.key in placement.admitted],
        cache=base.eligibility,
        admitted_flavors={
            key: frozenset(f for f in assignment.flavors.values() if f)
            for key, assignment in placement.admitted.items()
        },
    )


def _with_held(snapshot: Snapshot, decisions: list[WorkloadDecision]) -> list[WorkloadDecision]:
    """The decisions and a deferral per held workload (Kueue's reason), all in queue order."""
    if not snapshot.held:
        return decisions
    held = [
        (
            h.workload.queue_key,
            WorkloadDecision(
                name=h.workload.key, decision=Decision.DEFER, priority=h.workload.priority, reasons=[h.reason]
            ),
        )
        for h in snapshot.held
    ]
    by_key = {w.key: w.queue_key for w in snapshot.workloads}
    planned = [(by_key[d.name], d) for d in decisions]
    return [d for _, d in sorted([*planned, *held], key=lambda pair: pair[0])]


def _eligibility(cache: CandidateCache, workload: Workload) -> list[FlavorEligibility]:
    """Per PodSet and allowed flavor: eligible nodes and the filter that excludes each other node."""
    return [
        FlavorEligibility(
            pod_set=ps.name,
            flavor=cand.flavor.name if cand.flavor is not None else None,
            eligible=len(cand.nodes),
            excluded=dict(cand.excluded),
            admission_tolerated=dict(cand.admission_tolerated),
        )
        for ps in workload.pod_sets
        for cand in cache.get(workload, ps)
    ]


def _nodes_of(assignment: WorkloadAssignment) -> frozenset[str]:
    return frozenset(pod.node for pods in assignment.pods.values() for pod in pods)


def _admit(
    workload: Workload,
    assignment: WorkloadAssignment,
    eligibility: list[FlavorEligibility],
    nodes: dict[str, Node],
    waits_for_layout: list[str],
) -> WorkloadDecision:
    """The admission of one workload: its pods with their GPU UUIDs and enforcement filled in."""
    pod_sets = []
    gpus = 0.0
    for ps in workload.pod_sets:
        pods = [enforced(pod, nodes.get(pod.node), ps.request) for pod in assignment.pods.get(ps.name, [])]
        gpus += len(pods) * ps.request.gpu_equivalent
        pod_sets.append(PodSetPlacement(name=ps.name, flavor=assignment.flavors.get(ps.name), pods=pods))
    return WorkloadDecision(
        name=workload.key,
        decision=Decision.ADMIT,
        priority=workload.priority,
        gpus=round(gpus, 3),
        pod_sets=pod_sets,
        eligibility=eligibility,
        waits_for_layout=waits_for_layout,
    )
