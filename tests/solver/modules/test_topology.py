"""Inter-node topology: one domain of a required level, and few domains as a preference."""

from __future__ import annotations

from optsched.model.snapshot import PodSet
from optsched.solver.context import ModelContext
from optsched.solver.modules.topology import RequiredTopology, Topology
from optsched.solver.objective import Stage
from tests.builders import RACK, node, pods, snapshot, workload
from tests.solver.modules.helpers import (
    admit_only,
    apply,
    assert_feasible,
    assert_infeasible,
    cheapest,
    context,
    fix,
)

NODES = [node("x0", rack="r1"), node("x1", rack="r1"), node("y0", rack="r2"), node("y1", rack="r2")]


def _required(counts: dict[str, int]) -> ModelContext:
    ctx = context(snapshot(NODES, [workload("gang", pods(2, 8, required_topology=RACK))]))
    apply(ctx, RequiredTopology())
    fix(ctx, admit={"gang": True}, pods={("gang", "main"): counts})
    return ctx


def test_a_required_rack_holds_every_pod() -> None:
    assert_feasible(_required({"x0": 1, "x1": 1}))
    assert_feasible(_required({"y0": 1, "y1": 1}))
    assert_infeasible(_required({"x0": 1, "y0": 1}))


def _spread_cost(gang: PodSet, counts: dict[str, int], weight: int = 1) -> float:
    ctx = context(snapshot(NODES, [workload("gang", gang)]))
    admit_only(ctx, "gang")
    terms = apply(ctx, Topology(), weight=weight)
    assert [t.stage for t in terms] == [Stage.TOPOLOGY]
    fix(ctx, pods={("gang", "main"): counts})
    return cheapest(ctx, terms)


def test_a_gang_pays_per_node_and_per_rack_it_uses() -> None:
    # Node 1 each, rack 4 each (one block: blocks cost nothing here).
    assert _spread_cost(pods(2, 8), {"x0": 1, "x1": 1}) == 2 + 4
    assert _spread_cost(pods(2, 8), {"x0": 1, "y0": 1}) == 2 + 2 * 4
    assert _spread_cost(pods(2, 4), {"x0": 2}) == 1 + 4


def test_a_preferred_level_weighs_more_and_the_weight_multiplies() -> None:
    preferred = pods(2, 8, preferred_topology=RACK)
    assert _spread_cost(preferred, {"x0": 1, "y0": 1}) == 2 + 2 * 16
    assert _spread_cost(pods(2, 8), {"x0": 1, "y0": 1}, weight=3) == 3 * (2 + 2 * 4)


def test_single_pods_and_deferred_gangs_have_no_spread() -> None:
    ctx = context(snapshot(NODES, [workload("one", pods(1, 8)), workload("gang", pods(2, 8))]))
    admit_only(ctx, "one")
    assert apply(ctx, Topology()) == []
