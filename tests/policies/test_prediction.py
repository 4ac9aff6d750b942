"""Greedy and TAS plans on device-plugin nodes: the GPUs NVIDIA's best-effort choice will give."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from optsched.model.placement import Enforcement, Placement
from optsched.model.snapshot import GpuMode, Node, NodeUsage, Snapshot
from optsched.policies.choosers import BestFit, FirstFit
from optsched.policies.greedy import greedy_placement, tas_placement
from optsched.topology.best_effort import Board, best_effort
from tests.builders import node, pods, snapshot, workload

SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)
PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7))
SWITCH = (tuple(range(8)),)


def board_node(islands: tuple[tuple[int, ...], ...], **update: object) -> Node:
    return node("n1", islands=[list(i) for i in islands]).model_copy(update={"numa": SOCKETS, **update})


def used(*gpus: int) -> dict[str, NodeUsage]:
    return {"n1": NodeUsage(gpu_milli=tuple(1000 if g in gpus else 0 for g in range(8)))}


def mixed(n1: Node, busy: Sequence[int]) -> Snapshot:
    jobs = [
        workload("one", pods(2, 1), priority=9),
        workload("pair", pods(1, 2), priority=5),
        workload("three", pods(1, 3)),
    ]
    return snapshot([n1], jobs, usage=used(*busy))


def in_prediction_order(snap: Snapshot, placement: Placement) -> list[tuple[int, tuple[int, ...] | None]]:
    """(size, GPUs) of every pod: biggest first, then queue order, then pod index."""
    rows = []
    for rank, w in enumerate(sorted(snap.workloads, key=lambda w: w.queue_key)):
        for pod in placement.admitted[w.key].pods["main"]:
            assert pod.enforcement != Enforcement.NONE
            rows.append((-w.pod_sets[0].request.gpus, rank, pod.index, pod.gpus))
    rows.sort(key=lambda r: r[:3])
    return [(-size, gpus) for size, _, _, gpus in rows]


def sequence(board: Board, free: list[int], sizes: list[int]) -> list[tuple[int, ...]]:
    picks = []
    for size in sizes:
        picks.append(best_effort(free, size, board))
        free = [g for g in free if g not in picks[-1]]
    return picks


def _firstfit(snap: Snapshot) -> Placement:
    return greedy_placement(snap, FirstFit())


def _bestfit(snap: Snapshot) -> Placement:
    return greedy_placement(snap, BestFit())


POLICIES: dict[str, Callable[[Snapshot], Placement]] = {
    "firstfit": _firstfit,
    "bestfit": _bestfit,
    "tas": tas_placement,
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    ("islands", "busy"), [(PAIRS, (2,)), (SWITCH, (4,))], ids=["bridged-a100", "nvswitch"]
)
def test_every_whole_gpu_pod_gets_the_best_effort_pick_in_order(
    policy: str, islands: tuple[tuple[int, ...], ...], busy: tuple[int, ...]
) -> None:
    snap = mixed(board_node(islands), busy)
    rows = in_prediction_order(snap, POLICIES[policy](snap))
    free = [g for g in range(8) if g not in busy]
    assert [gpus for _, gpus in rows] == sequence(
        Board(8, islands, SOCKETS), free, [size for size, _ in rows]
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_on_hami_and_dra_nodes_the_walks_own_indices_stay(policy: str) -> None:
    for update in ({"hami": True}, {"gpu_mode": GpuMode.DRA}):
        snap = snapshot([board_node(PAIRS, **update)], [workload("one", pods(1, 1))], usage=used(2))
        [pod] = POLICIES[policy](snap).admitted["default/one"].pods["main"]
        # The walk's choice: the tightest island with room (FirstFit, BestFit) or the lowest index (TAS).
        assert pod.gpus == ((0,) if policy == "tas" else (3,))
        assert pod.enforcement is None
