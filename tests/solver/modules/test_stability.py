"""Stability: pods moved against the previous plan."""

from __future__ import annotations

from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.solver.modules.stability import Stability
from optsched.solver.objective import Stage
from tests.builders import node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, cheapest, context, fix

SNAP = snapshot([node("n1"), node("n2")], [workload("a", pods(2, 4))])
PREVIOUS = Plan(
    status=PlanStatus.OPTIMAL,
    workloads=[
        WorkloadDecision(
            name="default/a",
            decision="admit",
            pod_sets=[
                PodSetPlacement(
                    name="main",
                    pods=[
                        PodPlacement(index=i, node="n1", gpus=(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3))
                        for i in (0, 1)
                    ],
                )
            ],
        )
    ],
)
"""The previous plan put both pods of ``a`` on n1."""


def _moved(counts: dict[str, int], admitted: bool = True, weight: int = 1) -> float:
    ctx = context(SNAP, previous=PREVIOUS)
    terms = apply(ctx, Stability(), weight=weight)
    assert [t.stage for t in terms] == [Stage.STABILITY]
    fix(ctx, admit={"a": admitted}, pods={("a", "main"): counts})
    return cheapest(ctx, terms)


def test_pods_kept_where_they_were_cost_nothing() -> None:
    assert _moved({"n1": 2}) == 0


def test_every_moved_pod_counts_once() -> None:
    assert _moved({"n1": 1, "n2": 1}) == 1
    assert _moved({"n2": 2}) == 2
    assert _moved({}, admitted=False) == 2


def test_the_weight_multiplies_the_moves() -> None:
    assert _moved({"n2": 2}, weight=3) == 6


def test_without_a_previous_plan_there_is_no_stage() -> None:
    assert apply(context(SNAP), Stability()) == []
