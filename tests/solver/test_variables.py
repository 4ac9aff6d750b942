"""The variable containers: creation order, queries, fixing values for tests."""

from __future__ import annotations

import pytest

from tests.builders import node, pods, snapshot, workload
from tests.solver.modules.helpers import context

SNAP = snapshot(
    [node("n1"), node("n2", gpus=4)],
    [workload("a", pods(1, 8), pods(2, 1, name="side")), workload("b", pods(1, 4))],
)


def test_variables_are_created_workload_by_workload_in_window_order() -> None:
    ctx = context(SNAP)
    names = [v.name for v in ctx.model.proto.variables]
    assert names == ["admit[0]", "y[0,0]", "y[1,0]", "y[1,1]", "admit[1]", "y[2,0]", "y[2,1]"]


def test_a_podset_knows_its_candidates_by_node() -> None:
    ctx = context(SNAP)
    big = ctx.vars.pod_set("default/a", "main")
    assert [(c.node, c.ub) for c in big.candidates] == [(0, 1)]  # an 8-GPU pod does not fit n2
    assert big.on(1) is None and big.on(0) is big.candidates[0]
    assert big.admit is ctx.vars.workload("default/a").admit


def test_by_node_lists_the_podsets_of_admitted_workloads_once_admission_is_fixed() -> None:
    ctx = context(SNAP)
    assert list(ctx.vars.by_node) == [0, 1]
    assert [f"{ps.workload.name}/{ps.pod_set.name}" for ps, _ in ctx.vars.on_node(1)] == ["a/side", "b/main"]
    assert [g for g, _ in ctx.vars.whole_gpu_terms(1)] == [1, 4]
    ctx.vars.keep_admitted({1})
    assert [ps.workload.name for ps, _ in ctx.vars.on_node(0)] == ["b"]
    assert not ctx.vars.is_active(ctx.vars.workload("default/a"))


def test_fix_refuses_a_node_that_is_not_a_candidate() -> None:
    ctx = context(SNAP)
    with pytest.raises(ValueError, match="not a candidate"):
        ctx.vars.fix(ctx.model, pods={("default/a", "main"): {"n2": 1}})
