"""Why a workload waits, as reason values its owner understands and a program can count.

A deferral reason names the blocking constraint and by how much: a node filter
no node passes, a gang larger than any topology domain, a quota that is used
up, or free capacity that is too small or too scattered after the plan's
admissions (and whose admissions took it). Every reason is re-derived from the
snapshot and the free capacity left after the plan, so the solver and the
greedy baselines get the same explanations. The first reason names the binding
constraint: static filters first (:mod:`filters`), then quota (:mod:`quota`),
then capacity and who took it (:mod:`capacity`).
"""

from __future__ import annotations

from functools import partial

from optsched.capacity.state import ClusterState
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Snapshot, Workload
from optsched.planning.reasons.capacity import capacity_reasons
from optsched.planning.reasons.context import Memo, PlanContext
from optsched.planning.reasons.filters import never_fits, no_node
from optsched.planning.reasons.quota import quota_reason
from optsched.planning.reasons.shared import shape_key

__all__ = ["Memo", "PlanContext", "beyond_window_reason", "explain_deferral"]

BEYOND_WINDOW = "beyond the planning window"


def beyond_window_reason() -> Reason:
    """The optimizer planned only the head of the queue; this workload was behind it."""
    return Reason(code=ReasonCode.BEYOND_PLANNING_WINDOW, message=BEYOND_WINDOW)


def explain_deferral(
    snapshot: Snapshot, workload: Workload, state_after: ClusterState, *, context: PlanContext | None = None
) -> list[Reason]:
    """Why ``workload`` is not admitted by a plan that leaves ``state_after`` free (binding one first)."""
    context = context or PlanContext()
    cache = context.candidates(snapshot)
    if not workload.pod_sets:
        return [Reason(code=ReasonCode.NO_MATCHING_NODE, message="workload has no pod sets")]
    if snapshot.cluster_queue_of(workload) is None and workload.queue_name and snapshot.cluster_queues:
        queue = f"{workload.namespace}/{workload.queue_name}"
        return [
            Reason(
                code=ReasonCode.QUEUE_NOT_FOUND,
                message=f"LocalQueue {queue} does not lead to a known ClusterQueue",
                scope=f"LocalQueue {queue}",
            )
        ]
    per_pod_set = [(ps, cache.get(workload, ps)) for ps in workload.pod_sets]
    for ps, cands in per_pod_set:
        if not any(c.nodes for c in cands):
            key = ("no-node", shape_key(ps, cands))
            return [context.memo.remember(key, partial(no_node, snapshot, ps, cands))]
    for ps, cands in per_pod_set:
        never = context.memo.remember(
            ("never", shape_key(ps, cands)), partial(never_fits, snapshot, ps, cands, context.memo)
        )
        if never is not None:
            return [never]
    quota = quota_reason(snapshot, workload, per_pod_set, context)
    reasons = ([quota] if quota is not None else []) + capacity_reasons(
        snapshot, workload, per_pod_set, state_after, context
    )
    return reasons or [
        Reason(
            code=ReasonCode.POLICY_CHOICE,
            message="fits the capacity and quota left after this plan, but the policy did not admit it "
            "(another choice of nodes for earlier work, or the time limit)",
        )
    ]
