"""The set-partitioning model of a fragmentation batch window, solved in two lexicographic phases.

One boolean per pattern (:mod:`optsched.bench.batch_patterns`); at most one
pattern per node; per task type, the chosen patterns hold at most the window's
tasks of that type. Phase one maximises placed GPU demand, then placed tasks;
phase two keeps that and minimises the fragmentation increase, then the node
indices (the earlier node wins a tie, as in online FGD). Two phases keep the
coefficients small: one weighted objective would need weights near the limit
of 64-bit integers.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from optsched.bench.batch_patterns import Counts, Pattern
from optsched.solver.clock import SearchClock

PLACE_SHARE = 0.25
"""Share of a window's budget for the placed-demand phase (usually proven optimal at once)."""


def solve_window(
    patterns: Sequence[Pattern],
    available: dict[int, int],
    *,
    node_count: int,
    time_limit_s: float,
    workers: int = 1,
    seed: int = 0,
    hint: Sequence[Pattern] = (),
) -> list[Pattern]:
    """The chosen patterns (none when the model finds no solution)."""
    if not patterns:
        return []
    model = cp_model.CpModel()
    y = [model.new_bool_var(f"y{i}") for i in range(len(patterns))]
    by_node: dict[int, list[int]] = {}
    by_type: dict[int, list[tuple[int, int]]] = {}
    for i, pattern in enumerate(patterns):
        by_node.setdefault(pattern.node, []).append(i)
        for type_id, count in pattern.counts:
            by_type.setdefault(type_id, []).append((i, count))
    for members in by_node.values():
        model.add_at_most_one(y[i] for i in members)
    for type_id, holders in by_type.items():
        model.add(sum(count * y[i] for i, count in holders) <= available[type_id])
    tasks = sum(available.values())
    placed = sum((p.placed_milli * (tasks + 1) + p.tasks) * y[i] for i, p in enumerate(patterns))
    hinted: set[tuple[int, Counts]] = {(p.node, p.counts) for p in hint}
    for i, pattern in enumerate(patterns):
        model.add_hint(y[i], (pattern.node, pattern.counts) in hinted)
    model.maximize(placed)
    first = _solve(model, time_limit_s * PLACE_SHARE, workers, seed)
    if first is None:
        return []
    best_placed = int(first.objective_value)
    values = [first.boolean_value(v) for v in y]
    model.clear_hints()  # type: ignore[no-untyped-call]
    for var, value in zip(y, values, strict=True):
        model.add_hint(var, value)
    model.add(placed >= best_placed)
    weight = node_count * tasks + 1
    model.minimize(sum((p.cost * weight + p.node) * y[i] for i, p in enumerate(patterns)))
    second = _solve(model, time_limit_s * (1 - PLACE_SHARE), workers, seed)
    if second is not None:
        values = [second.boolean_value(v) for v in y]
    return [p for p, value in zip(patterns, values, strict=True) if value]


def _solve(model: cp_model.CpModel, budget: float, workers: int, seed: int) -> cp_model.CpSolver | None:
    solver = cp_model.CpSolver()
    # Deterministic time: the same window gives the same plan however loaded the machine is.
    SearchClock(deterministic=True).limit(solver, budget)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return solver
