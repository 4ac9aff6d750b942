"""The search budget's unit: wall-clock seconds, or CP-SAT's deterministic time."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.solver.clock import WALL_CAP_FACTOR, SearchClock
from optsched.solver.objective import ObjectiveTerm, Stage
from optsched.solver.stages import stage_values


def _busy_model() -> cp_model.CpModel:
    """A knapsack big enough that the solver does measurable work."""
    model = cp_model.CpModel()
    items = [model.new_bool_var(f"x{i}") for i in range(60)]
    weights = [(i * 37) % 101 + 1 for i in range(60)]
    model.add(cp_model.LinearExpr.weighted_sum(items, weights) <= 1_000)
    model.maximize(cp_model.LinearExpr.weighted_sum(items, [(i * 53) % 97 + 1 for i in range(60)]))
    return model


def test_a_deterministic_clock_sets_both_limits_and_counts_the_work_done() -> None:
    clock = SearchClock(deterministic=True)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    clock.limit(solver, 0.5)
    assert solver.parameters.max_deterministic_time == 0.5
    assert solver.parameters.max_time_in_seconds == WALL_CAP_FACTOR * 0.5
    before = clock.now()
    solver.solve(_busy_model())
    clock.charge(solver)
    assert clock.now() - before == solver.response_proto.deterministic_time > 0


def test_a_wall_clock_sets_only_the_time_limit() -> None:
    clock = SearchClock()
    solver = cp_model.CpSolver()
    clock.limit(solver, 0.5)
    assert solver.parameters.max_time_in_seconds == 0.5
    assert solver.parameters.max_deterministic_time > 1e9  # CP-SAT's "no limit"


def test_stage_values_are_costs_in_stage_order() -> None:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 9, "x")
    y = model.new_bool_var("y")
    terms = [
        ObjectiveTerm(Stage.PACKING, 3 * x + 1),
        ObjectiveTerm(Stage.TOPOLOGY, 2 * y + x, maximize=True),
        ObjectiveTerm(Stage.TOPOLOGY, 5 * y, maximize=True),
    ]
    values = {x.index: 4, y.index: 1}
    # Stage topology (first) sums its terms (2 + 4 + 5) and is maximised, so it counts as a cost of -11.
    assert stage_values(terms, values) == (-11, 13)
