"""Packing: the price of the GPUs a placement leaves free, node by node."""

from __future__ import annotations

from optsched.model.snapshot import FULL_GPU_MILLI, NodeUsage, PodSet
from optsched.solver.modules.capacity import Capacity
from optsched.solver.modules.packing import BEST_FIT_COST, OPEN_NODE_COST, Packing, leftover_cost
from optsched.solver.objective import Stage
from tests.builders import node, pods, snapshot, workload
from tests.solver.modules.helpers import admit_only, apply, cheapest, context, fix

BUSY = NodeUsage(gpu_milli=(FULL_GPU_MILLI,) * 4 + (0,) * 4, gpu_mem_mib=(81_920,) * 4 + (0,) * 4, pods=4)
"""Four of eight GPUs taken."""


def _cost(pod_set: PodSet, on: str, weight: int = 1) -> float:
    snap = snapshot([node("empty"), node("busy")], [workload("w", pod_set)], usage={"busy": BUSY})
    ctx = context(snap)
    admit_only(ctx, "w")
    apply(ctx, Capacity())
    terms = apply(ctx, Packing(), weight=weight)
    assert [t.stage for t in terms] == [Stage.PACKING]
    fix(ctx, pods={("w", "main"): {on: 1}})
    return cheapest(ctx, terms)


def test_the_cost_of_a_leftover_is_the_table_of_leftover_cost() -> None:
    shapes = {1: 1.0}
    on_busy = leftover_cost(3, 4, False, shapes) + leftover_cost(8, 8, True, shapes)
    assert _cost(pods(1, 1), "busy") == on_busy
    on_empty = leftover_cost(4, 4, False, shapes) + leftover_cost(7, 8, True, shapes)
    assert _cost(pods(1, 1), "empty") == on_empty


def test_a_partly_used_node_fills_before_an_empty_one_is_opened() -> None:
    assert _cost(pods(1, 1), "busy") < _cost(pods(1, 1), "empty")
    assert leftover_cost(7, 8, True, {}) - leftover_cost(8, 8, True, {}) == OPEN_NODE_COST + 8 * BEST_FIT_COST


def test_an_opened_share_slot_counts_as_a_used_gpu() -> None:
    share = pods(1, 1, gpu_milli=500)
    assert _cost(share, "busy") == _cost(pods(1, 1), "busy")


def test_the_weight_multiplies_the_cost() -> None:
    assert _cost(pods(1, 1), "busy", weight=2) == 2 * _cost(pods(1, 1), "busy")
