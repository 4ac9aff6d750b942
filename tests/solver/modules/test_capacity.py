"""Node capacity: every limit holds across PodSets, and shares land on concrete GPUs."""

from __future__ import annotations

from optsched.model.snapshot import FULL_GPU_MILLI, Node, NodeUsage, PodSet
from optsched.solver.context import ModelContext
from optsched.solver.modules.capacity import Capacity
from tests.builders import node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, context, feasible, fix


def _together(
    host: Node, *sets: PodSet, usage: NodeUsage | None = None, capacity: bool = True
) -> ModelContext:
    """One pod of each PodSet (one workload each) pinned on ``host``."""
    names = [f"w{i}" for i in range(len(sets))]
    snap = snapshot(
        [host],
        [workload(name, ps) for name, ps in zip(names, sets, strict=True)],
        usage={host.name: usage} if usage else None,
    )
    ctx = context(snap)
    if capacity:
        apply(ctx, Capacity())
    fix(ctx, admit=dict.fromkeys(names, True), pods={(name, "main"): {host.name: 1} for name in names})
    return ctx


def _fits(host: Node, *sets: PodSet, usage: NodeUsage | None = None) -> bool:
    # Each case fits without the module, so the module is what says no.
    assert feasible(_together(host, *sets, usage=usage, capacity=False))
    return feasible(_together(host, *sets, usage=usage))


def test_whole_gpus_of_two_podsets_share_the_nodes_free_gpus() -> None:
    assert not _fits(node("n1"), pods(1, 6), pods(1, 4))
    assert _fits(node("n1"), pods(1, 4), pods(1, 4))


def test_cpu_memory_and_pod_slots_hold_across_podsets() -> None:
    assert not _fits(node("n1", cpu=16_000), pods(1, 0, cpu=10_000), pods(1, 0, cpu=10_000))
    assert not _fits(node("n1", mem=8_192), pods(1, 0, mem=6_000), pods(1, 0, mem=6_000))
    one_slot = node("n1").model_copy(update={"max_pods": 1})
    assert not _fits(one_slot, pods(1, 0), pods(1, 0))
    assert _fits(node("n1"), pods(1, 0), pods(1, 0))


def test_extended_resources_hold_across_podsets() -> None:
    mig = "nvidia.com/mig-1g.10gb"
    host = node("n1", gpus=0, extended={mig: 3})
    assert not _fits(host, pods(1, 0, extended={mig: 2}), pods(1, 0, extended={mig: 2}))
    assert _fits(host, pods(1, 0, extended={mig: 2}), pods(1, 0, extended={mig: 1}))


def test_shares_on_one_gpu_stay_within_its_compute_and_memory() -> None:
    gpu = node("n1", gpus=1)
    assert _fits(gpu, pods(1, 1, gpu_milli=400), pods(1, 1, gpu_milli=400))
    assert not _fits(gpu, *[pods(1, 1, gpu_milli=400)] * 3)
    assert not _fits(gpu, *[pods(1, 1, gpu_milli=300, gpu_mem=30_000)] * 3)


def test_a_share_on_an_untouched_gpu_takes_that_gpu_from_whole_gpu_pods() -> None:
    assert not _fits(node("n1", gpus=2), pods(1, 1, gpu_milli=500), pods(1, 2))
    # GPU 0 is already shared: a share can go there and leave GPU 1 whole.
    half = NodeUsage(gpu_milli=(500, 0), gpu_mem_mib=(10_000, 0), pods=1)
    assert _fits(node("n1", gpus=2), pods(1, 1, gpu_milli=500), pods(1, 1), usage=half)


def test_share_variables_are_recorded_per_gpu_and_per_untouched_slot() -> None:
    half = NodeUsage(gpu_milli=(500, 0, FULL_GPU_MILLI), gpu_mem_mib=(10_000, 0, 81_920), pods=2)
    snap = snapshot([node("n1", gpus=3)], [workload("s", pods(2, 1, gpu_milli=500))], usage={"n1": half})
    ctx = context(snap)
    apply(ctx, Capacity())
    ps = ctx.vars.pod_set("default/s", "main")
    assert [g for g, _ in ctx.vars.shares.on_gpu(ps.index, 0)] == [0]
    assert len(ctx.vars.shares.slots(0)) == 1 == len(ctx.vars.shares.fresh(ps.index, 0))


def test_limits_that_cannot_bind_are_left_out() -> None:
    ctx = context(snapshot([node("n1")], [workload("small", pods(1, 2))]))
    apply(ctx, Capacity())
    assert len(ctx.model.proto.constraints) == 0
