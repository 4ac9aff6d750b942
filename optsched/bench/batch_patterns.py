"""Patterns of a set-partitioning batch window: which window tasks can land together on one node, and how.

The FGD fragmentation of a node depends on its whole free state, including
which GPU each share went to, so the window cannot price tasks one by one:
two shares that pair on one GPU leave a different node than the same shares on
two GPUs. A pattern is one way a node can end the window: a multiset of window
task types, each with its GPU indices, priced by the exact fragmentation of the
resulting node minus that of the node before. The window model then picks at
most one pattern per node (none = the node stays as it is).

The enumeration grows patterns one task at a time, breadth first, within the
node's CPU, memory, pod slots, extended resources, GPU model, GPU count and
per-GPU compute and memory. It is bounded, and pruned where pruning is exact
or nearly so:

* a share is offered only one GPU per distinct free state (GPUs with the same
  free compute, memory and task slots give the same node up to the order of
  its GPUs, and fragmentation does not see that order); whole GPUs come from
  :meth:`NodeState.choose_gpus`, as fragmentation does not tell fully free
  GPUs apart either;
* two partial patterns with the same task multiset and the same resulting free
  state are the same pattern (exact dominance); of the different states with
  the same multiset, only the ``keep_states`` cheapest are grown further;
* at most ``max_patterns`` multisets per node, ``max_size`` tasks per pattern
  and ``max_evals`` node evaluations per node.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from optsched.capacity.fragmentation import FragMeter, products_of
from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest

COST_SCALE = 1_000_000
"""Pattern costs are fragmentation in micro-GPUs, so CP-SAT sees whole numbers."""

Counts = tuple[tuple[int, int], ...]
"""A task multiset: (type, how many) pairs sorted by type."""

Step = tuple[int, tuple[int, ...]]
"""One task of a pattern: its type and GPU indices."""


@dataclass(frozen=True)
class Pattern:
    """One way a node can end the window."""

    node: int
    counts: Counts
    steps: tuple[Step, ...]
    cost: int
    """Fragmentation of the node after the pattern minus before, in micro-GPUs."""
    placed_milli: int
    tasks: int


@dataclass(frozen=True)
class PatternLimits:
    """Bounds of the enumeration on one node."""

    max_patterns: int = 48
    max_size: int = 8
    keep_states: int = 2
    max_evals: int = 400


DEFAULT_LIMITS = PatternLimits()


@dataclass(frozen=True)
class TaskType:
    """Window tasks with the same request: interchangeable, so patterns count them."""

    type_id: int
    request: PodRequest
    available: int
    """How many tasks of this type the window holds."""


def gpu_options(node: NodeState, req: PodRequest) -> list[tuple[int, ...]]:
    """Distinct GPU assignments of one task on ``node`` as it is now (empty list: it does not fit)."""
    allowed = products_of(req)
    if allowed and node.product not in allowed:
        return []
    if not node.fits_resources(req):
        return []
    if req.is_share and req.gpus == 1:
        out: list[tuple[int, ...]] = []
        seen: set[tuple[int, int, int]] = set()
        for gpu in node.share_candidates(req):
            key = (node.gpu_milli[gpu], node.gpu_mem[gpu], node.gpu_tasks[gpu])
            if key not in seen:
                seen.add(key)
                out.append((gpu,))
        if not out and node.fresh_share_fits(req):
            out.append(())  # an untouched GPU whose index the node picks
        return out
    gpus = node.choose_gpus(req)
    return [] if gpus is None else [tuple(gpus)]


def state_key(node: NodeState) -> tuple[Hashable, ...]:
    """The node's free state up to the order of its GPUs (what fragmentation and later fits depend on)."""
    gpus = tuple(sorted(zip(node.gpu_milli, node.gpu_mem, node.gpu_tasks, node.healthy, strict=True)))
    return (node.cpu, node.mem, node.pods, node.unknown, gpus, tuple(sorted(node.ext.items())))


def pattern_cost(
    node: NodeState, steps: Sequence[Step], types: dict[int, PodRequest], meter: FragMeter
) -> int:
    """Cost of ``steps`` on ``node``: its fragmentation increase in micro-GPUs (``node`` is restored)."""
    before = meter.node(node)
    for type_id, gpus in steps:
        node.take(types[type_id], gpus)
    after = meter.node(node)
    for type_id, gpus in reversed(steps):
        node.give_back(types[type_id], gpus)
    return round((after - before) * COST_SCALE)


def make_pattern(node_index: int, steps: Sequence[Step], types: dict[int, PodRequest], cost: int) -> Pattern:
    """A pattern from its steps (counts and totals derived)."""
    counted: dict[int, int] = {}
    for type_id, _ in steps:
        counted[type_id] = counted.get(type_id, 0) + 1
    return Pattern(
        node=node_index,
        counts=tuple(sorted(counted.items())),
        steps=tuple(steps),
        cost=cost,
        placed_milli=sum(types[t].gpu_milli_total for t, _ in steps),
        tasks=len(steps),
    )


_Partial = tuple[Counts, tuple[Step, ...], int, int]
"""A partial pattern: counts, steps, position of its last type, cost."""


def _add(counts: Counts, type_id: int) -> Counts:
    merged = dict(counts)
    merged[type_id] = merged.get(type_id, 0) + 1
    return tuple(sorted(merged.items()))


def enumerate_patterns(
    node_index: int,
    node: NodeState,
    types: Sequence[TaskType],
    meter: FragMeter,
    limits: PatternLimits = DEFAULT_LIMITS,
) -> list[Pattern]:
    """The node's patterns over the window task ``types`` that list it, cheapest per multiset.

    ``node`` is changed while enumerating and restored before returning.
    """
    requests = {t.type_id: t.request for t in types}
    before = meter.node(node)
    best: dict[Counts, Pattern] = {}
    frontier: list[_Partial] = [((), (), 0, 0)]
    evals = 0
    for _ in range(limits.max_size):
        layer: dict[tuple[Counts, tuple[Hashable, ...]], _Partial] = {}
        for counts, steps, last, _cost in frontier:
            for type_id, gpus in steps:
                node.take(requests[type_id], gpus)
            evals += _grow(node, types, meter, before, counts, steps, last, layer)
            for type_id, gpus in reversed(steps):
                node.give_back(requests[type_id], gpus)
            if evals >= limits.max_evals:
                break
        frontier = _select(layer, best, node_index, requests, limits)
        if not frontier or evals >= limits.max_evals or len(best) >= limits.max_patterns:
            break
    return list(best.values())


def _grow(
    node: NodeState,
    types: Sequence[TaskType],
    meter: FragMeter,
    before: float,
    counts: Counts,
    steps: tuple[Step, ...],
    last: int,
    layer: dict[tuple[Counts, tuple[Hashable, ...]], _Partial],
) -> int:
    """Add one more task (of a type at or after ``last``) to a partial pattern booked on ``node``."""
    evals = 0
    have = dict(counts)
    for position in range(last, len(types)):
        task_type = types[position]
        if have.get(task_type.type_id, 0) >= task_type.available:
            continue
        req = task_type.request
        for gpus in gpu_options(node, req):
            node.take(req, gpus)
            key = (_add(counts, task_type.type_id), state_key(node))
            cost = round((meter.node(node) - before) * COST_SCALE)
            node.give_back(req, gpus)
            evals += 1
            known = layer.get(key)
            if known is None or cost < known[3]:
                layer[key] = (key[0], (*steps, (task_type.type_id, gpus)), position, cost)
    return evals


def _select(
    layer: dict[tuple[Counts, tuple[Hashable, ...]], _Partial],
    best: dict[Counts, Pattern],
    node_index: int,
    requests: dict[int, PodRequest],
    limits: PatternLimits,
) -> list[_Partial]:
    """Record the cheapest pattern per new multiset and keep the cheapest states of each to grow."""
    by_counts: dict[Counts, list[_Partial]] = {}
    for partial in layer.values():
        by_counts.setdefault(partial[0], []).append(partial)
    room = max(limits.max_patterns - len(best), 0)
    # Cheapest multisets first when the cap cuts the layer; ties in the order they were found.
    ranked = sorted(by_counts.items(), key=lambda item: min(p[3] for p in item[1]))[:room]
    frontier: list[_Partial] = []
    for counts, partials in ranked:
        partials.sort(key=lambda p: p[3])
        cheapest = partials[0]
        best[counts] = make_pattern(node_index, cheapest[1], requests, cheapest[3])
        frontier.extend(partials[: limits.keep_states])
    return frontier
