"""The snapshot's free capacity and quota usage, read once per plan.

A plan needs the same facts in several places: the greedy walk books pods
on them, the solver bounds its variables by them, the plan builder measures
before and after against them and the deferral reasons attribute shortfalls
with them, and all of them ask which nodes each PodSet may use.
:class:`Baseline` builds each once; whoever changes capacity or quota works on a
copy (:meth:`ClusterState.copy`, :meth:`QuotaLedger.copy`), so one plan never
re-reads the snapshot's capacity or quota.
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched.capacity.eligibility import CandidateCache
from optsched.capacity.state import ClusterState
from optsched.kueue.quota import QuotaLedger
from optsched.model.snapshot import Snapshot


@dataclass(frozen=True)
class Baseline:
    """Free capacity and quota usage of one snapshot; read it, and copy before changing it."""

    snapshot: Snapshot
    state: ClusterState
    ledger: QuotaLedger
    eligibility: CandidateCache
    """Which nodes each PodSet shape may use: a memo the greedy walk, the solver and the reasons share."""

    @classmethod
    def of(cls, snapshot: Snapshot) -> Baseline:
        return cls(
            snapshot,
            ClusterState.from_snapshot(snapshot),
            QuotaLedger.from_snapshot(snapshot),
            CandidateCache(snapshot),
        )

    @classmethod
    def reuse(cls, snapshot: Snapshot, baseline: Baseline | None) -> Baseline:
        """``baseline`` when it was built from ``snapshot``, else a new one."""
        return baseline if baseline is not None and baseline.snapshot is snapshot else cls.of(snapshot)
