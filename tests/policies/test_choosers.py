"""Node choosers pick the node their rule says, on hand-built clusters."""

from __future__ import annotations

import pytest

from optsched.capacity.fragmentation import ProductRequest
from optsched.capacity.state import NodeState
from optsched.errors import InputError
from optsched.model.snapshot import NodeUsage, PodRequest
from optsched.policies.choosers import FGD, BestFit, FirstFit, LeastAllocated, RandomFit, make_chooser
from tests.builders import H100, T4, node


def one_gpu(name: str, free_milli: int, *, product: str = H100) -> NodeState:
    return NodeState.from_node(node(name, gpus=1, product=product), NodeUsage(gpu_milli=(1000 - free_milli,)))


SHARE_300 = PodRequest(cpu_milli=1000, gpus=1, gpu_milli=300)
SHARE_600 = PodRequest(cpu_milli=1000, gpus=1, gpu_milli=600)


def test_firstfit_takes_first_fitting_node() -> None:
    nodes = [one_gpu("a", 200), one_gpu("b", 1000), one_gpu("c", 700)]
    choice = FirstFit().choose(nodes, SHARE_300)
    assert choice is not None and choice[0].name == "b" and choice[1] == [0]


def test_bestfit_takes_tightest_node() -> None:
    nodes = [one_gpu("a", 200), one_gpu("b", 1000), one_gpu("c", 700)]
    choice = BestFit().choose(nodes, SHARE_300)
    assert choice is not None and choice[0].name == "c"


def test_fgd_avoids_leaving_a_leftover_the_workload_cannot_use() -> None:
    # 0.7 free - 0.3 = 0.4 left, useless to the 0.6 shares; 1.0 - 0.3 = 0.7 still takes one.
    nodes = [one_gpu("a", 700), one_gpu("b", 1000)]
    fgd = FGD([(SHARE_600, 1.0)])
    choice = fgd.choose(nodes, SHARE_300)
    assert choice is not None and choice[0].name == "b" and choice[1] == [0]
    assert BestFit().choose(nodes, SHARE_300)[0].name == "a"  # type: ignore[index]


def test_fgd_picks_the_share_gpu_that_fragments_least() -> None:
    usage = NodeUsage(gpu_milli=(300, 700, 0, 1000))  # free 700, 300, 1000, 0
    state = NodeState.from_node(node("n", gpus=4), usage)
    # For a 0.4 share: on GPU 1 (0.3 free) it does not fit; on GPU 0 (0.7) leaves 0.3 (< 0.4,
    # fragment); on GPU 2 (1.0) leaves 0.6 (usable). FGD takes GPU 2; best fit would take GPU 0.
    share = PodRequest(cpu_milli=1000, gpus=1, gpu_milli=400)
    choice = FGD([(share, 1.0)]).choose([state], share)
    assert choice is not None and choice[1] == [2]
    assert state.choose_gpus(share) == [0]


def test_fgd_memo_sees_state_changes() -> None:
    nodes = [one_gpu("a", 700), one_gpu("b", 1000)]
    fgd = FGD([(SHARE_600, 1.0)])
    first = fgd.choose(nodes, SHARE_300)
    assert first is not None
    first[0].take(SHARE_300, first[1])
    second = fgd.choose(nodes, SHARE_300)
    # b now has 0.7 free, same as a: equal increase, lowest index wins.
    assert second is not None and second[0].name == "a"


def test_least_allocated_spreads() -> None:
    nodes = [one_gpu("a", 300), one_gpu("b", 1000), one_gpu("c", 700)]
    choice = LeastAllocated().choose(nodes, PodRequest(cpu_milli=1000, gpus=1, gpu_milli=200))
    assert choice is not None and choice[0].name == "b"


def test_whole_gpu_pod_gets_one_island() -> None:
    state = NodeState.from_node(
        node("n", gpus=8, islands=[[0, 1, 2, 3], [4, 5, 6, 7]]),
        NodeUsage(gpu_milli=(1000, 0, 0, 0, 0, 0, 0, 0)),
    )
    choice = BestFit().choose([state], PodRequest(gpus=3))
    assert choice is not None and choice[1] == [1, 2, 3]


def test_nothing_fits_returns_none() -> None:
    nodes = [one_gpu("a", 200)]
    for name in ("firstfit", "bestfit", "leastallocated", "fgd", "random", "gpupacking", "dotprod"):
        assert make_chooser(name, [(SHARE_300, 1.0)], seed=1).choose(nodes, SHARE_300) is None


def test_product_constraint_is_respected() -> None:
    nodes = [one_gpu("h", 1000), one_gpu("t", 1000, product=T4)]
    req = ProductRequest(cpu_milli=1000, gpus=1, products=frozenset({T4}))
    for name in ("firstfit", "bestfit", "leastallocated", "fgd", "random", "gpupacking", "dotprod"):
        choice = make_chooser(name, [(req, 1.0)], seed=3).choose(nodes, req)
        assert choice is not None and choice[0].name == "t", name


def test_random_is_seeded_and_feasible() -> None:
    nodes = [one_gpu(f"n{i}", 1000 if i % 2 else 100) for i in range(20)]
    picks = [RandomFit(7).choose(nodes, SHARE_300) for _ in range(2)]
    assert picks[0] is not None and picks[1] is not None
    assert picks[0][0].name == picks[1][0].name
    assert int(picks[0][0].name[1:]) % 2 == 1


def test_seeded_ties_are_reproducible_and_spread() -> None:
    nodes = [one_gpu(f"n{i}", 1000) for i in range(10)]
    picked = {BestFit(seed).choose(nodes, SHARE_300)[0].name for seed in range(20)}  # type: ignore[index]
    assert len(picked) > 1
    assert BestFit().choose(nodes, SHARE_300)[0].name == "n0"  # type: ignore[index]


def test_unknown_chooser_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown chooser"):
        make_chooser("worstfit", [])
