"""The per-pod node choice every greedy baseline implements.

A greedy policy is only a rule for picking one node (and GPU indices) for one
pod among nodes where it fits. The queue walk, gang all-or-nothing, topology
domains and plan building are shared (``optsched.policies.greedy``), and the
trace replay benchmark calls :meth:`NodeChooser.choose` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest


class NodeChooser(Protocol):
    """Picks a node and GPU indices for one pod, or None if it fits nowhere."""

    name: str

    @property
    def random_ties(self) -> bool:
        """True when equally good nodes are picked at random (so identical nodes are not all alike)."""
        ...

    def choose(self, nodes: Sequence[NodeState], req: PodRequest) -> tuple[NodeState, list[int]] | None: ...
