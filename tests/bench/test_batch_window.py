"""The batch window prefers joining a partly used GPU over opening a whole one for a GPU share."""

from __future__ import annotations

from optsched.bench.batch import BatchPlacer
from optsched.capacity.fragmentation import Shape
from optsched.capacity.state import NodeState
from optsched.model.snapshot import NodeUsage, PodRequest
from tests.builders import node


def _share(milli: int) -> PodRequest:
    return PodRequest(cpu_milli=1000, memory_mib=1024, gpus=1, gpu_milli=milli)


def _cluster() -> list[NodeState]:
    empty = NodeState.from_node(node("empty", gpus=1))
    half_used = NodeState.from_node(node("half-used", gpus=1), NodeUsage(gpu_milli=(500,)))
    return [empty, half_used]


# Mostly 0.5-GPU shares: FGD alone would keep the half-free GPU for them and open the empty one.
SHAPES: list[Shape] = [(_share(500), 0.9), (_share(400), 0.1)]


def test_a_share_joins_the_partly_used_gpu_instead_of_opening_a_free_one() -> None:
    states = _cluster()
    placer = BatchPlacer(SHAPES, time_limit_s=5.0, workers=1)
    [choice] = placer(states, [_share(400)])
    assert choice is not None
    assert choice[0].name == "half-used" and choice[1] == [0]
    # The placer leaves booking to the replay: the cluster is unchanged.
    assert [s.gpu_milli for s in states] == [[1000], [500]]


def test_placing_more_gpu_still_comes_before_opening_fewer_gpus() -> None:
    states = _cluster()
    placer = BatchPlacer(SHAPES, time_limit_s=5.0, workers=1)
    choices = placer(states, [_share(400), _share(600)])
    # Only the empty GPU takes the 0.6 share: it is opened so that both shares are placed.
    assert all(c is not None for c in choices)
    big = choices[1]
    assert big is not None and big[0].name == "empty"
