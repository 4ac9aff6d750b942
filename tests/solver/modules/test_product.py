"""One GPU product per gang, unless every GPU PodSet allows mixing."""

from __future__ import annotations

from optsched.solver.context import ModelContext
from optsched.solver.modules.product import OneProduct
from tests.builders import A100, node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, assert_feasible, assert_infeasible, context, fix

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]
NODES = [node("h1"), node("h2"), node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)]


def _placed(counts: dict[str, int], *, mixed: bool = False) -> ModelContext:
    gang = pods(2, 8).model_copy(update={"allow_mixed_products": mixed})
    ctx = context(snapshot(NODES, [workload("gang", gang)]))
    apply(ctx, OneProduct())
    fix(ctx, admit={"gang": True}, pods={("gang", "main"): counts})
    return ctx


def test_a_gang_stays_on_one_product() -> None:
    assert_feasible(_placed({"h1": 1, "h2": 1}))
    assert_infeasible(_placed({"h1": 1, "a1": 1}))


def test_a_gang_may_mix_products_when_allowed() -> None:
    assert_feasible(_placed({"h1": 1, "a1": 1}, mixed=True))


def test_a_workload_with_one_product_needs_no_choice() -> None:
    ctx = context(snapshot(NODES[:2], [workload("gang", pods(2, 8))]))
    apply(ctx, OneProduct())
    assert len(ctx.model.proto.variables) == 1 + 2  # admit and one count per node
