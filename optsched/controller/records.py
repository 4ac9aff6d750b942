"""The placement record kept on a Workload: made here from a plan (read by ``kueue.placement_record``).

The record is written to the Workload's ``optsched.io/placement`` annotation
*before* our admission check turns Ready. Pods only exist after the check is
Ready, so whenever a pod needs pinning its record is already durable: a
controller that crashes between the two writes, or restarts at any point,
finds everything it needs in the cluster itself. The format is documented with
its reader.
"""

from __future__ import annotations

from optsched.kueue.placement_record import (
    PlacementRecord,
    RecordError,
    plan_id_of,
    record_of,
)
from optsched.model.plan import WorkloadDecision

__all__ = ["PlacementRecord", "RecordError", "plan_id_for", "record_from_decision", "record_of"]


def plan_id_for(uid: str, decision: WorkloadDecision) -> str:
    """The plan id of one admission of one workload (:func:`~optsched.kueue.placement_record.plan_id_of`)."""
    return plan_id_of(uid, ((ps.name, ps.pods) for ps in decision.pod_sets))


def record_from_decision(uid: str, decision: WorkloadDecision, planned_at: float = 0.0) -> PlacementRecord:
    """The record for an admitted workload decision, made from the plan of ``planned_at`` (epoch seconds)."""
    return PlacementRecord(
        planned_at=planned_at,
        plan_id=plan_id_for(uid, decision),
        pod_sets={ps.name: tuple(sorted(ps.pods, key=lambda p: p.index)) for ps in decision.pod_sets},
        flavors={ps.name: ps.flavor for ps in decision.pod_sets if ps.flavor},
    )
