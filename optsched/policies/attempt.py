"""Pods booked while one gang is tried, so a gang that does not fit is undone whole.

Greedy policies place a workload's pods one at a time on a working copy of
the cluster; Kueue admits gangs all-or-nothing, so a gang that runs out of room
half way must give back what it took. The attempt also keeps two caches of the
working state current: node-state keys (invalidated per booking) and free GPU
compute per product.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest


@dataclass
class Attempt:
    """Pods booked on the working state while a gang is tried, so it can be undone whole."""

    keys: dict[str, Hashable]
    """Cached node-state keys of the working state; a booking invalidates its node's key."""
    free: dict[str, int]
    """Free GPU compute (milli) per GPU product, kept current with every booking."""
    product: dict[str, str]
    """Node name -> GPU product."""
    changed: Callable[[NodeState], None] | None = None
    """Told of every node whose free state a booking or an undo changed (the walk's state indexes)."""
    booked: list[tuple[NodeState, PodRequest, list[int]]] = field(default_factory=list)

    def take(self, node: NodeState, req: PodRequest, gpus: list[int]) -> None:
        node.take(req, gpus)
        self.keys.pop(node.name, None)
        self.free[self.product[node.name]] -= req.gpu_milli_total
        self.booked.append((node, req, gpus))
        if self.changed is not None:
            self.changed(node)

    def rollback(self, mark: int = 0) -> None:
        while len(self.booked) > mark:
            node, req, gpus = self.booked.pop()
            node.give_back(req, gpus)
            self.keys.pop(node.name, None)
            self.free[self.product[node.name]] += req.gpu_milli_total
            if self.changed is not None:
                self.changed(node)
