"""One flavor per PodSet, chosen when admitted."""

from __future__ import annotations

from optsched.model.names import PRODUCT_LABEL
from optsched.model.snapshot import (
    ClusterQueue,
    FlavorQuota,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from optsched.solver.context import ModelContext
from optsched.solver.modules.flavor import OneFlavor
from tests.builders import A100, H100, node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, assert_feasible, assert_infeasible, context, fix

GPU = "nvidia.com/gpu"
PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]
FLAVORS = [
    ResourceFlavor(name="h100", node_labels={PRODUCT_LABEL: H100}),
    ResourceFlavor(name="a100", node_labels={PRODUCT_LABEL: A100}),
]


QUEUE = ClusterQueue(
    name="cq",
    resource_groups=(
        ResourceGroup(
            covered_resources=(GPU,),
            flavors=tuple(
                FlavorQuota(name=f.name, resources=(ResourceQuota(name=GPU, nominal=64),)) for f in FLAVORS
            ),
        ),
    ),
)
"""A ClusterQueue whose GPU quota spans both flavors."""


def _placed(counts: dict[str, int], admitted: bool = True) -> ModelContext:
    snap = snapshot(
        [node("h1"), node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)],
        [workload("w", pods(2, 4), queue="lq")],
        cluster_queues=[QUEUE],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="cq")],
        flavors=FLAVORS,
    )
    ctx = context(snap)
    apply(ctx, OneFlavor())
    fix(ctx, admit={"w": admitted}, pods={("w", "main"): counts})
    return ctx


def test_candidates_span_both_flavors() -> None:
    ctx = _placed({})
    assert [c.flavor for c in ctx.vars.pod_set("default/w", "main").candidates] == ["h100", "a100"]


def test_a_podset_uses_one_flavor() -> None:
    assert_feasible(_placed({"h1": 2}))
    assert_feasible(_placed({"a1": 2}))
    assert_infeasible(_placed({"h1": 1, "a1": 1}))


def test_a_deferred_podset_picks_no_flavor() -> None:
    assert_feasible(_placed({}, admitted=False))
