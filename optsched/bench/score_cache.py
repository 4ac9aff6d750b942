"""Per-node score caching for the trace replay's online choosers.

A replay asks the same chooser about the same nodes for every task, and only
the node that took the last task has changed; caching each node's score per
request shape makes a decision cost one score instead of one per node.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from optsched.capacity.fragmentation import request_key
from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest
from optsched.policies.choosers import FirstFit, ScoredChooser

# A cached None means the node cannot take the request, so a missing entry needs its own marker.
_MISSING: Any = object()


class TrackedChooser:
    """Caches a scored chooser's per-node scores until that node changes.

    In a replay only the node that received the last task changes, so nearly
    every score of the next decision is a cache hit; the result is exactly
    what :meth:`ScoredChooser.choose` returns on the same nodes.
    """

    def __init__(self, chooser: ScoredChooser, states: Sequence[NodeState]) -> None:
        self.chooser = chooser
        self.states = states
        self.cache: list[dict[int, tuple[float, list[int]] | None]] = [{} for _ in states]
        self._request_ids: dict[tuple[Hashable, ...], int] = {}

    def invalidate(self, index: int) -> None:
        self.cache[index].clear()

    def choose(self, indices: Sequence[int], req: PodRequest) -> tuple[int, list[int]] | None:
        rkey = self._request_ids.setdefault(request_key(req), len(self._request_ids))
        cache = self.cache
        states = self.states
        score = self.chooser.feasible_score
        first_only = isinstance(self.chooser, FirstFit)
        random_ties = self.chooser.random_ties
        best = 0.0
        tied: list[tuple[NodeState, list[int]]] = []
        tied_index: list[int] = []
        for i in indices:
            node_cache = cache[i]
            scored = node_cache.get(rkey, _MISSING)
            if scored is _MISSING:
                scored = score(states[i], req)
                node_cache[rkey] = scored
            if scored is None:
                continue
            if first_only:
                return i, list(scored[1])
            value = scored[0]
            if not tied or value < best:
                best, tied, tied_index = value, [(states[i], scored[1])], [i]
            elif value == best and random_ties:
                tied.append((states[i], scored[1]))
                tied_index.append(i)
        if not tied:
            return None
        node, gpus = self.chooser.pick(tied)
        index = tied_index[next(k for k, (n, _) in enumerate(tied) if n is node)]
        return index, self.chooser.finalize(node, req, list(gpus))
