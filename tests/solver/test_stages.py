"""The lexicographic stage runner: what one priority stage may do to the levels after it."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.settings import Settings
from optsched.solver.clock import SearchClock
from optsched.solver.expressions import evaluate
from optsched.solver.objective import ObjectiveTerm, Stage
from optsched.solver.stages import StagesOutcome, _lexicographic, _Runner, _stages, solve_stages


def _two_levels() -> tuple[cp_model.CpModel, cp_model.IntVar, list[cp_model.IntVar], list[ObjectiveTerm]]:
    """A high-priority job that fits anywhere and 20 low-priority jobs, all hinted as not admitted."""
    model = cp_model.CpModel()
    high = model.new_bool_var("high")
    low = [model.new_bool_var(f"low{i}") for i in range(20)]
    model.add(high + sum(low) <= 15)
    for var in (high, *low):
        model.add_hint(var, 0)
    terms = [
        ObjectiveTerm(Stage.PRIORITY, 8 * high, maximize=True, priority=100),
        ObjectiveTerm(Stage.PRIORITY, cp_model.LinearExpr.sum(low), maximize=True, priority=0),
    ]
    return model, high, low, terms


def test_a_priority_stage_keeps_the_lower_levels_work_it_does_not_need() -> None:
    model, high, low, terms = _two_levels()
    outcome = StagesOutcome(solution=None)
    runner = _Runner(model, Settings(workers=1), SearchClock(), outcome, {})
    stages = _stages(terms)
    runner.lower = [stages[1].expr]
    assert runner._solve(stages[0], 5.0, 5.0)
    assert outcome.solution is not None
    assert outcome.solution[high.index] == 1
    # The first stage alone already admits as much low-priority work as room allows.
    assert sum(outcome.solution[v.index] for v in low) == 14
    assert outcome.results[0].value == 8 and outcome.results[0].bound == 8


def test_the_stage_values_and_order_are_unchanged_by_the_lower_term() -> None:
    model, _, _, terms = _two_levels()
    outcome = solve_stages(model, Settings(workers=1), SearchClock(), terms, SearchClock().now() + 5.0)
    assert [(r.name, r.value, r.bound) for r in outcome.results] == [
        ("priority:100", 8.0, 8.0),
        ("priority:0", 14.0, 14.0),
    ]


def test_a_stage_without_a_solution_continues_from_the_fallback() -> None:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.add(x <= 4)
    terms = [ObjectiveTerm(Stage.PRIORITY, x, maximize=True, priority=0)]
    outcome = StagesOutcome(solution=None)
    runner = _Runner(model, Settings(workers=1), SearchClock(), outcome, {}, fallback={x.index: 3})
    stage = _stages(terms)[0]
    assert runner._incumbent(stage, "UNKNOWN", 0.0) == [3]
    assert "continues from the greedy placement" in outcome.notes[0]
    runner._record(stage, "FEASIBLE", [3], float("inf"), 1, 0.0)
    assert outcome.solution == [3]
    assert outcome.results[0].value == 3 and outcome.results[0].status == "FEASIBLE"
    # The stage is pinned at the fallback's value: later stages may not admit less.
    model.maximize(-x)
    check = cp_model.CpSolver()
    assert check.solve(model) == cp_model.OPTIMAL and check.value(x) == 3


def test_an_infeasible_model_is_a_failure_even_with_a_fallback() -> None:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.add(x >= 5)
    model.add(x <= 4)
    terms = [ObjectiveTerm(Stage.PRIORITY, x, maximize=True, priority=0)]
    clock = SearchClock()
    outcome = solve_stages(model, Settings(workers=1), clock, terms, clock.now() + 2.0, fallback={x.index: 3})
    assert outcome.solution is None
    assert "INFEASIBLE" in outcome.failure or "MODEL_INVALID" in outcome.failure


def test_a_priority_stage_does_not_trade_the_next_levels_work_for_the_one_after() -> None:
    # The middle job is worth 5 and takes room 10; each low job is worth 1 and takes room 1.
    model = cp_model.CpModel()
    high = model.new_bool_var("high")
    middle = model.new_bool_var("middle")
    low = [model.new_bool_var(f"low{i}") for i in range(20)]
    model.add(10 * middle + sum(low) <= 12)
    terms = [
        ObjectiveTerm(Stage.PRIORITY, 8 * high, maximize=True, priority=1000),
        ObjectiveTerm(Stage.PRIORITY, 5 * middle, maximize=True, priority=100),
        ObjectiveTerm(Stage.PRIORITY, cp_model.LinearExpr.sum(low), maximize=True, priority=0),
    ]
    outcome = StagesOutcome(solution=None)
    runner = _Runner(model, Settings(workers=1), SearchClock(), outcome, {})
    stages = _stages(terms)
    runner.lower = [stages[1].expr, stages[2].expr]
    assert runner._solve(stages[0], 5.0, 5.0)
    assert outcome.solution is not None
    # Summed, the low jobs (12) would outweigh the middle one (5 + 2): in order, the middle one wins.
    assert outcome.solution[middle.index] == 1
    assert sum(outcome.solution[v.index] for v in low) == 2


def test_levels_too_large_to_rank_exactly_all_still_count_nearer_ones_more() -> None:
    model = cp_model.CpModel()
    a, b, c = (model.new_int_var(0, 100, name) for name in "abc")
    exact, top = _lexicographic([a, b, c], 10**9)
    assert exact is not None and top == 100 * 101 * 101 + 100 * 101 + 100
    close, top = _lexicographic([a, b, c], 10**4)
    assert close is not None and top == 3 * 100 + 2 * 100 + 100
    values = [0] * 3
    values[a.index], values[b.index], values[c.index] = 1, 2, 3
    assert evaluate(close, values) == 3 * 1 + 2 * 2 + 3
    assert _lexicographic([a, b, c], 100) == (None, 0)
