"""NVLink islands: required pods inside one island, and the price of pods that span islands."""

from __future__ import annotations

from optsched.model.snapshot import FULL_GPU_MILLI, NodeUsage, PodSet
from optsched.solver.context import ModelContext
from optsched.solver.modules.nvlink import NvlinkIslands, NvlinkPreference, NvlinkRequired
from optsched.solver.objective import Stage
from tests.builders import A100, node, pods, snapshot, workload
from tests.solver.modules.helpers import (
    admit_only,
    apply,
    assert_feasible,
    assert_infeasible,
    cheapest,
    context,
    fix,
)

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]
PER_GPU = 8
"""``TopologyWeights.nvlink_pod``: the price of one GPU of a pod that spans islands."""


def used(*indices: int) -> NodeUsage:
    return NodeUsage(
        gpu_milli=tuple(FULL_GPU_MILLI if i in indices else 0 for i in range(8)),
        gpu_mem_mib=tuple(40_960 if i in indices else 0 for i in range(8)),
        pods=len(indices),
    )


def _a100(*sets: PodSet, usage: NodeUsage | None = None) -> ModelContext:
    """One A100 box of NVLink pairs, one workload per PodSet."""
    box = node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)
    names = [f"w{i}" for i in range(len(sets))]
    snap = snapshot(
        [box],
        [workload(name, ps) for name, ps in zip(names, sets, strict=True)],
        usage={"a1": usage} if usage else None,
    )
    return context(snap)


def _required_pairs(first: int, second: int, *, module: bool = True) -> ModelContext:
    # GPUs 1 and 2 are taken: six GPUs are free, but only pairs (4,5) and (6,7) are whole.
    ctx = _a100(pods(2, 2, nvlink_required=True), pods(1, 2, nvlink_required=True), usage=used(1, 2))
    if module:
        apply(ctx, NvlinkRequired())
    fix(ctx, pods={("w0", "main"): {"a1": first}, ("w1", "main"): {"a1": second}})
    return ctx


def test_required_pods_are_counted_inside_islands() -> None:
    assert_feasible(_required_pairs(1, 1))
    assert_feasible(_required_pairs(2, 0))
    assert_infeasible(_required_pairs(2, 1))
    assert_feasible(_required_pairs(2, 1, module=False))


def test_required_island_counts_are_modelled_with_the_admission_model_only_where_required() -> None:
    ctx = _a100(pods(1, 2), pods(1, 4))
    apply(ctx, NvlinkRequired())
    assert ctx.vars.islands.nodes() == []
    ctx = _a100(pods(1, 2, nvlink_required=True), pods(1, 4))
    apply(ctx, NvlinkRequired())
    (record,) = ctx.vars.islands.nodes()
    assert sorted(record.sizes) == [2]  # a 4-GPU pod never fits one pair
    assert sorted(record.counts) == [(i, 2) for i in range(4)]


def test_with_the_preference_off_only_required_sizes_need_island_counts() -> None:
    # The only required PodSet takes one GPU: nothing to count unless the preference prices spans.
    for preference, counted in ((True, True), (False, False)):
        ctx = _a100(pods(1, 1, nvlink_required=True), pods(1, 2))
        apply(ctx, NvlinkRequired(preference=preference))
        (record,) = ctx.vars.islands.nodes()
        assert record.counted is counted


def test_island_counts_of_the_other_nodes_join_the_quality_model() -> None:
    ctx = _a100(pods(2, 2), pods(1, 2))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    (record,) = ctx.vars.islands.nodes()
    assert [ps.pod_set.count for ps, _ in record.sizes[2]] == [2]  # the deferred workload is left out
    assert ctx.vars.islands.count(0, 3, 2) is not None


def test_islands_never_hold_more_than_their_free_gpus() -> None:
    # Pair (0,1) has one GPU free: no 2-GPU pod can be counted in it.
    ctx = _a100(pods(1, 2), usage=used(0))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    assert ctx.vars.islands.count(0, 0, 2) is None
    assert ctx.vars.islands.count(0, 1, 2) is not None


def _spanning_price(pairs_taken: tuple[int, ...], placed: int) -> float:
    ctx = _a100(pods(placed, 2), usage=used(*pairs_taken))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    terms = apply(ctx, NvlinkPreference())
    assert {t.stage for t in terms} == {Stage.TOPOLOGY}
    fix(ctx, pods={("w0", "main"): {"a1": placed}})
    return cheapest(ctx, terms)


def test_a_pod_that_must_span_islands_costs_its_gpus() -> None:
    assert _spanning_price((), 2) == 0
    # GPUs 0, 2 and 4 taken: only pair (6,7) is whole, so of two 2-GPU pods one spans.
    assert _spanning_price((0, 2, 4), 2) == 2 * PER_GPU


def test_the_preference_weight_multiplies_the_span_price() -> None:
    ctx = _a100(pods(2, 2), usage=used(0, 2, 4))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    terms = apply(ctx, NvlinkPreference(), weight=3)
    fix(ctx, pods={("w0", "main"): {"a1": 2}})
    assert cheapest(ctx, terms) == 3 * 2 * PER_GPU


def test_a_pod_too_big_for_every_island_is_priced_in_its_own_stage() -> None:
    ctx = _a100(pods(1, 4))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    terms = apply(ctx, NvlinkPreference(), weight=3)
    assert [t.stage for t in terms] == [Stage.NVLINK_FIT]
    fix(ctx, pods={("w0", "main"): {"a1": 1}})
    assert cheapest(ctx, terms) == 4  # its GPUs, whatever the weight


def test_on_a_node_with_unknown_indices_every_multi_gpu_pod_spans() -> None:
    ctx = _a100(pods(1, 2), usage=NodeUsage(unknown_index_gpus=2, pods=1))
    admit_only(ctx, "w0")
    apply(ctx, NvlinkIslands())
    (record,) = ctx.vars.islands.nodes()
    assert not record.known and not record.counts
    terms = apply(ctx, NvlinkPreference())
    fix(ctx, pods={("w0", "main"): {"a1": 1}})
    assert cheapest(ctx, terms) == 2 * PER_GPU
