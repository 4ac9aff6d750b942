"""Gang all-or-nothing, and partial gangs when the switch is off."""

from __future__ import annotations

from optsched.model.snapshot import NodeUsage
from optsched.solver.context import ModelContext
from optsched.solver.modules.gang import Gang, PartialGang
from tests.builders import node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, assert_feasible, assert_infeasible, context, fix

NODES = [node("n1"), node("n2")]


def _gang(
    placed: dict[str, int], admitted: bool = True, *, min_count: int | None = None, partial: bool = False
) -> ModelContext:
    ctx = context(snapshot(NODES, [workload("gang", pods(3, 4, min_count=min_count))]))
    apply(ctx, PartialGang() if partial else Gang())
    fix(ctx, admit={"gang": admitted}, pods={("gang", "main"): placed})
    return ctx


def test_an_admitted_gang_places_every_pod() -> None:
    assert_feasible(_gang({"n1": 2, "n2": 1}))
    assert_infeasible(_gang({"n1": 2}))


def test_a_deferred_gang_places_no_pod() -> None:
    assert_feasible(_gang({}, admitted=False))
    assert_infeasible(_gang({"n1": 1}, admitted=False))


def test_min_count_admits_between_the_minimum_and_the_count() -> None:
    assert_feasible(_gang({"n1": 2}, min_count=2))
    assert_feasible(_gang({"n1": 2, "n2": 1}, min_count=2))
    assert_infeasible(_gang({"n1": 1}, min_count=2))


def test_a_podset_without_candidates_keeps_its_workload_out() -> None:
    full = NodeUsage(gpu_milli=(1000,) * 8)
    ctx = context(snapshot(NODES, [workload("busy", pods(1, 8))], usage={"n1": full, "n2": full}))
    apply(ctx, Gang())
    assert ctx.vars.pod_set("default/busy", "main").candidates == ()
    fix(ctx, admit={"busy": True})
    assert_infeasible(ctx)


def test_a_workload_no_node_can_ever_take_is_not_modelled() -> None:
    ctx = context(snapshot(NODES, [workload("huge", pods(1, 9)), workload("fits", pods(1, 8))]))
    assert [w.workload.name for w in ctx.problem.workloads] == ["fits"]
    assert not ctx.problem.beyond_window


def test_partial_gangs_place_any_part_but_only_when_admitted() -> None:
    assert_feasible(_gang({"n1": 1}, partial=True))
    assert_infeasible(_gang({"n1": 1}, admitted=False, partial=True))
    assert_infeasible(_gang({"n1": 2, "n2": 2}, partial=True))
