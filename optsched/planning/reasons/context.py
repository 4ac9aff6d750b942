"""What the deferral reasons know about a plan, and the answers they share between workloads.

Thousands of pending workloads share a few shapes, selectors and queues, so
answers that depend only on those ("can this shape ever fit", "where does it fit
best in this free state", "who took this quota") are computed once per plan and
remembered here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from optsched.capacity.eligibility import CandidateCache
from optsched.capacity.mig_room import mig_ceiling
from optsched.capacity.state import ClusterState, NodeState
from optsched.kueue.quota import QuotaLedger
from optsched.model.snapshot import Node, Snapshot, Workload

_T = TypeVar("_T")


class Memo:
    """Answers remembered by key for the life of one plan's reasons."""

    def __init__(self) -> None:
        self._answers: dict[Hashable, object] = {}
        self._kept: dict[int, object] = {}
        self._empty: dict[str, NodeState] = {}

    def remember(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()`` once per key."""
        if key not in self._answers:
            self._answers[key] = compute()
        return cast(_T, self._answers[key])

    def keep(self, value: object) -> None:
        """Hold ``value`` as long as the memo, so answers keyed by its ``id`` cannot go stale."""
        self._kept.setdefault(id(value), value)

    def empty_state(self, node: Node) -> NodeState:
        """The node with nothing running (for "can this ever fit")."""
        state = self._empty.get(node.name)
        if state is None:
            state = NodeState.from_node(node)
            if node.mig_gpus:
                # An empty node's MIG GPUs can take any layout.
                state.ext.update(mig_ceiling(node))
            self._empty[node.name] = state
        return state


@dataclass
class PlanContext:
    """What the plan did, for attributing capacity and quota to the work that took it."""

    state_before: ClusterState | None = None
    ledger_before: QuotaLedger | None = None
    """Quota usage the snapshot shows (None: derived from the snapshot when first needed)."""
    ledger_after: QuotaLedger | None = None
    """Quota usage after the plan's admissions (None: the snapshot's usage)."""
    admitted: list[tuple[Workload, frozenset[str]]] = field(default_factory=list)
    """Admitted workloads and the nodes their pods use."""
    admitted_flavors: dict[str, frozenset[str]] = field(default_factory=dict)
    """Workload key -> ResourceFlavors its admitted pods use (for quota attribution)."""
    cache: CandidateCache | None = None
    memo: Memo = field(default_factory=Memo)

    def candidates(self, snapshot: Snapshot) -> CandidateCache:
        """The eligibility cache of ``snapshot`` (a new one if the context holds another's)."""
        if self.cache is None or self.cache.snapshot is not snapshot:
            self.cache = CandidateCache(snapshot)
        return self.cache

    def quota_before(self, snapshot: Snapshot) -> QuotaLedger:
        if self.ledger_before is None:
            self.ledger_before = QuotaLedger.from_snapshot(snapshot)
        return self.ledger_before
