"""The placement record kept on a Workload: made here from a plan (read by ``kueue.placement_record``).

The record is written to the Workload's ``optsched.io/placement`` annotation
*before* our admission check turns Ready. Pods only exist after the check is
Ready, so whenever a pod needs pinning its record is already durable: a
controller that crashes between the two writes, or restarts at any point,
finds everything it needs in the cluster itself. The format is documented with
its reader.
"""

from __future__ import annotations

import hashlib
import json

from optsched.kueue.placement_record import PlacementRecord, RecordError, record_of
from optsched.model.plan import WorkloadDecision

__all__ = ["PlacementRecord", "RecordError", "plan_id_for", "record_from_decision", "record_of"]


def plan_id_for(uid: str, decision: WorkloadDecision) -> str:
    """A deterministic id for one admission of one workload: same placement, same id.

    Deterministic so that re-running a cycle after a crash rewrites the same
    record instead of producing a second one; a label value (<= 63 chars).
    """
    placement = [(ps.name, [(p.index, p.node, p.gpus) for p in ps.pods]) for ps in decision.pod_sets]
    digest = hashlib.sha256(json.dumps([uid, decision.name, placement]).encode()).hexdigest()
    return digest[:20]


def record_from_decision(uid: str, decision: WorkloadDecision) -> PlacementRecord:
    """The record for an admitted workload decision."""
    return PlacementRecord(
        plan_id=plan_id_for(uid, decision),
        pod_sets={ps.name: tuple(sorted(ps.pods, key=lambda p: p.index)) for ps in decision.pod_sets},
        flavors={ps.name: ps.flavor for ps in decision.pod_sets if ps.flavor},
    )
