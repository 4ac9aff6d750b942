"""GPUs of unknown index: counted, never named, and no obstacle to shares or pods where GPUs remain."""

from __future__ import annotations

from optsched.capacity.fit import pods_that_fit
from optsched.capacity.state import NodeState
from optsched.model.snapshot import NodeUsage, PodRequest
from tests.builders import node

SHARE = PodRequest(gpus=1, gpu_milli=500, gpu_mem_mib=20_480)
TWO = PodRequest(gpus=2)


def four_gpus_one_unknown() -> NodeState:
    return NodeState.from_node(node("n1", gpus=4), NodeUsage(unknown_index_gpus=1, pods=1))


def test_a_share_fits_beside_a_gpu_pod_of_unknown_index_but_its_gpu_is_left_to_the_node() -> None:
    state = four_gpus_one_unknown()
    assert state.choose_gpus(SHARE) == []
    assert pods_that_fit(state, SHARE) == 3  # one per whole free GPU: the node picks each one
    state.take(SHARE, [])
    assert (state.unknown, state.whole_free) == (2, 2)
    state.give_back(SHARE, [])
    assert (state.unknown, state.whole_free) == (1, 3)


def test_whole_pods_fit_where_enough_gpus_remain() -> None:
    state = four_gpus_one_unknown()
    assert state.fits(TWO) and pods_that_fit(state, TWO) == 1
    state.take(TWO, [])
    assert state.unknown == 3 and state.whole_free == 1
    assert not state.fits(TWO)
    assert state.choose_gpus(SHARE) == []
    state.take(SHARE, [])
    assert state.choose_gpus(SHARE) is None and pods_that_fit(state, SHARE) == 0


def test_a_partly_used_gpu_of_known_index_still_takes_shares_by_index() -> None:
    usage = NodeUsage(unknown_index_gpus=1, gpu_milli=(500, 0, 0, 0), gpu_mem_mib=(20_480, 0, 0, 0), pods=2)
    state = NodeState.from_node(node("n1", gpus=4), usage)
    assert state.choose_gpus(SHARE) == [0]
    assert pods_that_fit(state, SHARE) == 1 + 2


def test_a_share_larger_than_a_gpu_never_opens_one() -> None:
    state = four_gpus_one_unknown()
    assert state.choose_gpus(PodRequest(gpus=1, gpu_milli=500, gpu_mem_mib=100_000)) is None
