"""Mutable free capacity: whole GPUs, shares, islands and index-unknown usage."""

from optsched.capacity.state import NodeState, pick_whole_gpus
from optsched.model.snapshot import NodeUsage, PodRequest
from tests.builders import A100, node

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_whole_gpus_come_from_the_tightest_island_that_fits() -> None:
    # Island (0,1) has one free GPU, (2,3) two, (4,5) two: a 2-GPU pod takes a whole free pair,
    # a 1-GPU pod takes the half-used pair so whole pairs stay whole.
    free = {1, 2, 3, 4, 5}
    assert pick_whole_gpus([tuple(p) for p in PAIRS], free, 2) == [2, 3]
    assert pick_whole_gpus([tuple(p) for p in PAIRS], free, 1) == [1]


def test_spanning_islands_uses_as_few_as_possible() -> None:
    assert pick_whole_gpus([(0, 1, 2, 3), (4, 5, 6, 7)], {0, 4, 5, 6}, 4) == [0, 4, 5, 6]
    assert pick_whole_gpus([(0, 1), (2, 3)], {0}, 2) is None


def test_shares_never_exceed_compute_or_memory_of_a_gpu() -> None:
    state = NodeState.from_node(node("n", gpus=1, gpu_mem=16_000), NodeUsage())
    share = PodRequest(gpus=1, gpu_milli=600, gpu_mem_mib=8000)
    gpus = state.choose_gpus(share)
    assert gpus == [0]
    state.take(share, gpus)
    assert state.choose_gpus(share) is None  # 600 + 600 > 1000
    small = PodRequest(gpus=1, gpu_milli=300, gpu_mem_mib=9000)
    assert state.choose_gpus(small) is None  # memory 8000 + 9000 > 16000
    assert state.choose_gpus(PodRequest(gpus=1)) is None  # the only GPU is shared now


def test_give_back_restores_the_node() -> None:
    state = NodeState.from_node(node("n", islands=PAIRS, product=A100), NodeUsage())
    before = state.copy()
    req = PodRequest(gpus=2, cpu_milli=1000, memory_mib=10)
    gpus = state.choose_gpus(req)
    assert gpus is not None and state.in_one_island(gpus)
    state.take(req, gpus)
    state.give_back(req, gpus)
    assert state == before


def test_unknown_index_usage_is_counted_and_blocks_untouched_gpus_for_shares() -> None:
    usage = NodeUsage(gpu_milli=(0, 0, 500, 0), gpu_mem_mib=(0, 0, 0, 0), unknown_index_gpus=2)
    state = NodeState.from_node(node("n", gpus=4), usage)
    assert state.whole_free == 1  # GPUs 0, 1, 3 look free; two of them are taken
    assert state.choose_gpus(PodRequest(gpus=2)) is None
    assert state.share_candidates(PodRequest(gpus=1, gpu_milli=400)) == [2]


def test_unhealthy_gpus_are_never_free() -> None:
    state = NodeState.from_node(node("n", gpus=2, unhealthy=frozenset({1})), NodeUsage())
    assert state.fully_free_gpus() == (0,)
    assert state.choose_gpus(PodRequest(gpus=2)) is None


def test_free_gpu_cache_follows_take_and_give_back() -> None:
    state = NodeState.from_node(node("n", gpus=4), NodeUsage())
    req = PodRequest(gpus=2)
    gpus = state.choose_gpus(req)
    assert gpus is not None
    state.take(req, gpus)
    assert state.whole_free == 2
    state.give_back(req, gpus)
    assert state.whole_free == 4
    share = PodRequest(gpus=1, gpu_milli=100)
    state.take(share, [3])
    assert state.fully_free_gpus() == (0, 1, 2)


def test_a_pod_of_several_shares_takes_the_busiest_gpus_with_room_and_gives_them_back() -> None:
    usage = NodeUsage(gpu_milli=(500, 0, 200, 1000), gpu_mem_mib=(0, 0, 0, 81_920))
    state = NodeState.from_node(node("n", gpus=4), usage)
    shares = PodRequest(gpus=2, gpu_milli=400, gpu_mem_mib=1000)
    gpus = state.choose_gpus(shares)
    assert gpus == [0, 2]
    state.take(shares, gpus)
    assert state.gpu_milli == [100, 1000, 400, 0] and state.gpu_mem[0] == 81_920 - 1000
    assert state.choose_gpus(shares) == [1, 2]
    assert state.choose_gpus(PodRequest(gpus=3, gpu_milli=400)) is None
    state.give_back(shares, gpus)
    assert state.gpu_milli == [500, 1000, 800, 0]


def test_on_a_hami_node_a_share_naming_no_memory_takes_all_of_it() -> None:
    hami = node("n", gpus=2, gpu_mem=16_000).model_copy(update={"hami": True, "gpu_split": 10})
    state = NodeState.from_node(hami, NodeUsage(gpu_milli=(300, 0), gpu_mem_mib=(1000, 0), gpu_tasks=(1, 0)))
    cores = PodRequest(gpus=1, gpu_milli=200)
    assert state.share_mem(cores) == 16_000
    assert state.share_candidates(cores) == [1]
    assert state.gpu_tasks == [9, 10]
