"""A batch window whose objective is FGD's own measure: the fragmentation of the nodes it touches.

Online FGD places each task where the cluster's fragmentation grows least.
A window sees the next ``N`` arrived tasks and can place them together, so it
can price what online FGD cannot: the fragmentation of a node after *several*
window tasks landed on it, with every share on a specific GPU. That is a
set-partitioning model (:mod:`optsched.bench.batch_patterns` enumerates the
patterns): at most one pattern per node, each task in at most one chosen
pattern, and, lexicographically,

1. the most GPU demand placed (then the most tasks), never less than online
   FGD places on the same state: its sequential choices for the window are
   offered as patterns and hinted, and kept outright should the model end
   with less;
2. the least fragmentation increase summed over the touched nodes (the
   cluster's fragmentation after the window, as untouched nodes do not move);
3. the earlier nodes.

Each task type is offered its ``candidates`` best nodes by the exact FGD
increase. With a window of one task this is exact FGD: the node where
fragmentation grows least, ties to the earlier node. Tasks the model leaves
out get the online FGD choice on the updated state. Every solve gets a budget
of CP-SAT deterministic time with one seeded worker, so runs repeat under
load.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from optsched.bench.batch_model import solve_window
from optsched.bench.batch_patterns import (
    DEFAULT_LIMITS,
    Pattern,
    PatternLimits,
    Step,
    TaskType,
    enumerate_patterns,
    make_pattern,
    pattern_cost,
)
from optsched.capacity.fragmentation import FragMeter, Shape, products_of, request_key
from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest
from optsched.policies.choosers import FGD, ScoredChooser

CANDIDATES_PER_TYPE = 8
"""Nodes offered to each task type, best first by exact FGD increase."""

Choice = tuple[NodeState, list[int]]


@dataclass(frozen=True)
class WindowStats:
    """What the last window's model looked like (for tests and diagnostics)."""

    patterns: int
    nodes: int
    placed_milli: int
    online_milli: int
    used_online: bool


class _ScoreCache:
    """A chooser's per-node scores by request, valid until the node changes."""

    def __init__(self, chooser: ScoredChooser) -> None:
        self.chooser = chooser
        self.rows: list[dict[int, tuple[float, list[int]] | None]] = []

    def reset(self, size: int, dirty: set[int]) -> None:
        if len(self.rows) != size:
            self.rows = [{} for _ in range(size)]
        for index in dirty:
            self.rows[index].clear()

    def score(
        self, index: int, node: NodeState, req: PodRequest, rid: int, fresh: bool
    ) -> tuple[float, list[int]] | None:
        """The chooser's score of ``req`` on the node; ``fresh``: the node changed since it was cached."""
        if fresh:
            return self.chooser.feasible_score(node, req)
        row = self.rows[index]
        if rid not in row:
            row[rid] = self.chooser.feasible_score(node, req)
        return row[rid]

    def best(self, states: list[NodeState], req: PodRequest, rid: int, touched: set[int]) -> list[int]:
        """Node indices where ``req`` fits, best score first, ties to the earlier node."""
        allowed = products_of(req)
        scored: list[tuple[float, int]] = []
        for index, node in enumerate(states):
            if allowed and node.product not in allowed:
                continue
            hit = self.score(index, node, req, rid, index in touched)
            if hit is not None:
                scored.append((hit[0], index))
        scored.sort()
        return [index for _, index in scored]


class FragWindowPlacer:
    """Places a window of tasks by the exact FGD fragmentation of the nodes it touches."""

    def __init__(
        self,
        shapes: Sequence[Shape],
        *,
        time_limit_s: float = 1.0,
        workers: int = 1,
        seed: int = 0,
        candidates: int = CANDIDATES_PER_TYPE,
        limits: PatternLimits = DEFAULT_LIMITS,
    ) -> None:
        exact = FGD(shapes)
        self.meter = exact.meter
        self.rank = _ScoreCache(exact)
        # The replay's online rule (the authors' integer scores, ties to the earlier node): the floor the
        # window must not fall below, and the choice for tasks the model leaves out.
        self.online = _ScoreCache(FGD(shapes, quantized=True))
        self.time_limit_s = time_limit_s
        self.workers = workers
        self.seed = seed
        self.candidates = candidates
        self.limits = limits
        self._request_ids: dict[tuple[Hashable, ...], int] = {}
        self._dirty: set[int] = set()
        self.last: WindowStats | None = None

    def __call__(self, states: list[NodeState], requests: list[PodRequest]) -> list[Choice | None]:
        for cache in (self.rank, self.online):
            cache.reset(len(states), self._dirty)
        self._dirty = set()
        rids = [self._rid(req) for req in requests]
        types = self._types(requests, rids)
        online = self._online(states, requests, rids)
        patterns = self._patterns(states, types, requests, rids, online)
        chosen = solve_window(
            patterns,
            {t.type_id: t.available for t in types},
            node_count=len(states),
            time_limit_s=self.time_limit_s,
            workers=self.workers,
            seed=self.seed,
            hint=_online_patterns(online, states, requests, rids, self.meter),
        )
        result = self._assign(states, requests, rids, chosen)
        placed = _placed(result, requests)
        online_placed = _placed(online, requests)
        used_online = placed < online_placed
        if used_online:
            result = online
        self.last = WindowStats(
            len(patterns), len({p.node for p in patterns}), placed[0], online_placed[0], used_online
        )
        self._dirty = {id_ for id_, choice in _indexed(states, result)}
        return result

    def _rid(self, req: PodRequest) -> int:
        return self._request_ids.setdefault(request_key(req), len(self._request_ids))

    @staticmethod
    def _types(requests: list[PodRequest], rids: list[int]) -> list[TaskType]:
        counts: dict[int, int] = {}
        first: dict[int, PodRequest] = {}
        for req, rid in zip(requests, rids, strict=True):
            counts[rid] = counts.get(rid, 0) + 1
            first.setdefault(rid, req)
        return [TaskType(rid, first[rid], counts[rid]) for rid in sorted(counts)]

    def _online(
        self, states: list[NodeState], requests: list[PodRequest], rids: list[int]
    ) -> list[Choice | None]:
        """Online FGD's sequential choices for the window on the current state (the state is restored)."""
        touched: set[int] = set()
        result: list[Choice | None] = []
        for req, rid in zip(requests, rids, strict=True):
            ranked = self.online.best(states, req, rid, touched)
            if not ranked:
                result.append(None)
                continue
            index = ranked[0]
            hit = self.online.score(index, states[index], req, rid, True)
            assert hit is not None
            states[index].take(req, hit[1])
            touched.add(index)
            result.append((states[index], hit[1]))
        _undo(result, requests)
        return result

    def _patterns(
        self,
        states: list[NodeState],
        types: list[TaskType],
        requests: list[PodRequest],
        rids: list[int],
        online: list[Choice | None],
    ) -> list[Pattern]:
        """Enumerated patterns on every type's candidate nodes, plus online FGD's own node endings."""
        listing: dict[int, list[TaskType]] = {}
        for task_type in types:
            ranked = self.rank.best(states, task_type.request, task_type.type_id, set())
            for index in ranked[: self.candidates]:
                listing.setdefault(index, []).append(task_type)
        patterns: list[Pattern] = []
        for index in sorted(listing):
            patterns.extend(enumerate_patterns(index, states[index], listing[index], self.meter, self.limits))
        known = {(p.node, p.counts) for p in patterns}
        for pattern in _online_patterns(online, states, requests, rids, self.meter):
            if (pattern.node, pattern.counts) not in known:
                patterns.append(pattern)
        return patterns

    def _assign(
        self, states: list[NodeState], requests: list[PodRequest], rids: list[int], chosen: list[Pattern]
    ) -> list[Choice | None]:
        """Tasks onto the chosen patterns in arrival order; the rest by online FGD on the updated state."""
        result: list[Choice | None] = [None] * len(requests)
        waiting: dict[int, list[int]] = {}
        for task, rid in enumerate(rids):
            waiting.setdefault(rid, []).append(task)
        for pattern in chosen:
            for type_id, gpus in pattern.steps:
                task = waiting[type_id].pop(0)
                states[pattern.node].take(requests[task], gpus)
                result[task] = (states[pattern.node], list(gpus))
        touched = {p.node for p in chosen}
        for task, req in enumerate(requests):
            if result[task] is not None:
                continue
            ranked = self.online.best(states, req, rids[task], touched)
            if ranked:
                hit = self.online.score(ranked[0], states[ranked[0]], req, rids[task], True)
                assert hit is not None
                states[ranked[0]].take(req, hit[1])
                touched.add(ranked[0])
                result[task] = (states[ranked[0]], hit[1])
        _undo(result, requests)
        return result


def _indexed(states: list[NodeState], result: list[Choice | None]) -> list[tuple[int, Choice]]:
    index_of = {id(node): i for i, node in enumerate(states)}
    return [(index_of[id(c[0])], c) for c in result if c is not None]


def _undo(result: list[Choice | None], requests: list[PodRequest]) -> None:
    """The replay books the returned choices itself: give back what planning took, newest first."""
    for task in range(len(result) - 1, -1, -1):
        choice = result[task]
        if choice is not None:
            choice[0].give_back(requests[task], choice[1])


def _placed(result: list[Choice | None], requests: list[PodRequest]) -> tuple[int, int]:
    """GPU demand (milli) and tasks placed."""
    chosen = [req for req, c in zip(requests, result, strict=True) if c is not None]
    return sum(r.gpu_milli_total for r in chosen), len(chosen)


def _online_patterns(
    online: list[Choice | None],
    states: list[NodeState],
    requests: list[PodRequest],
    rids: list[int],
    meter: FragMeter,
) -> list[Pattern]:
    """Online FGD's choices for the window as one pattern per node it used."""
    index_of = {id(node): i for i, node in enumerate(states)}
    steps: dict[int, list[Step]] = {}
    for task, choice in enumerate(online):
        if choice is not None:
            steps.setdefault(index_of[id(choice[0])], []).append((rids[task], tuple(choice[1])))
    by_type = {rid: req for rid, req in zip(rids, requests, strict=True)}
    return [
        make_pattern(index, node_steps, by_type, pattern_cost(states[index], node_steps, by_type, meter))
        for index, node_steps in sorted(steps.items())
    ]


Placer = Callable[[list[NodeState], list[PodRequest]], list[Choice | None]]


def frag_placer_factory(
    *, time_limit_s: float = 1.0, workers: int = 1
) -> Callable[[Sequence[Shape], int], Placer]:
    """For :func:`optsched.bench.trace.run_policy_seeds`: one placer per seed."""

    def make(shapes: Sequence[Shape], seed: int) -> FragWindowPlacer:
        return FragWindowPlacer(shapes, time_limit_s=time_limit_s, workers=workers, seed=seed)

    return make
