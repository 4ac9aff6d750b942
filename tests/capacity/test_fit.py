"""Pods that fit a node: the one count the solver, the greedy policies and the reasons share."""

from optsched.capacity.fit import pods_that_fit, share_slots, spread_room
from optsched.capacity.state import NodeState
from optsched.model.snapshot import NodeUsage, PodRequest
from tests.builders import node

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


def state(usage: NodeUsage | None = None, **kwargs: object) -> NodeState:
    return NodeState.from_node(node("n1", **kwargs), usage)  # type: ignore[arg-type]


def test_whole_gpu_pods_are_bounded_by_every_resource() -> None:
    free = state(cpu=16_000)
    assert pods_that_fit(free, PodRequest(cpu_milli=1000, gpus=2)) == 4
    assert pods_that_fit(free, PodRequest(cpu_milli=5000, gpus=1)) == 3
    assert pods_that_fit(free, PodRequest(cpu_milli=1000, gpus=2), limit=1) == 1
    assert pods_that_fit(free, PodRequest(cpu_milli=20_000, gpus=1)) == 0


def test_nvlink_required_pods_count_per_island_and_never_where_indices_are_unknown() -> None:
    every_other = NodeUsage(gpu_milli=(1000, 0) * 4, gpu_mem_mib=(81_920, 0) * 4)
    broken = state(every_other, islands=PAIRS)
    req = PodRequest(gpus=2)
    assert pods_that_fit(broken, req) == 2
    assert pods_that_fit(broken, req, nvlink_required=True) == 0
    unknown = state(NodeUsage(unknown_index_gpus=2, gpu_milli=(0,) * 8, gpu_mem_mib=(0,) * 8))
    assert pods_that_fit(unknown, req) == 3
    assert pods_that_fit(unknown, req, nvlink_required=True) == 0


def test_shares_fill_partly_used_gpus_and_untouched_ones() -> None:
    one_half_used = NodeUsage(gpu_milli=(500,) + (0,) * 7, gpu_mem_mib=(40_960,) + (0,) * 7)
    share = PodRequest(gpus=1, gpu_milli=250, gpu_mem_mib=10_240)
    # GPU 0 holds two more quarter shares, each untouched GPU four.
    assert pods_that_fit(state(one_half_used), share) == 2 + 7 * 4
    unknown = NodeUsage(unknown_index_gpus=1, gpu_milli=(500,) + (0,) * 7, gpu_mem_mib=(40_960,) + (0,) * 7)
    # No untouched GPU can be named (any may be the unknown one): each of the 6 whole free GPUs takes
    # one share whose GPU the node picks.
    assert pods_that_fit(state(unknown), share) == 2 + 6


def test_pods_of_several_shares_need_that_many_different_gpus() -> None:
    # Two GPUs with room for two 0.5 shares each hold two pods of two shares; three GPUs hold three.
    half = PodRequest(gpus=2, gpu_milli=500)
    assert pods_that_fit(state(gpus=2), half) == 2
    assert pods_that_fit(state(gpus=3), half) == 3
    # One GPU with room for four shares cannot serve even one pod of two.
    lonely = NodeUsage(gpu_milli=(0, 1000), gpu_mem_mib=(0, 81_920))
    assert pods_that_fit(state(lonely, gpus=2), PodRequest(gpus=2, gpu_milli=250)) == 0


def test_spread_room_is_the_largest_count_whose_shares_fit_without_repeats() -> None:
    assert spread_room([4, 1, 1], 2) == 2  # the big GPU serves each pod once
    assert spread_room([3, 3, 3], 3) == 3
    assert spread_room([5], 2) == 0
    assert spread_room([], 2) == 0


def test_split_count_bounds_shares_per_gpu() -> None:
    tiny = PodRequest(gpus=1, gpu_milli=10)
    free = NodeState.from_node(node("n1", gpus=2).model_copy(update={"gpu_split": 3}))
    assert share_slots(free, tiny, None) == 3
    assert pods_that_fit(free, tiny) == 6
