"""The solver's plan on device-plugin nodes: the GPUs NVIDIA's best-effort choice will give, pod by pod."""

from __future__ import annotations

from collections.abc import Sequence

from optsched.model.placement import Enforcement, PodPlacement
from optsched.model.plan import Plan
from optsched.model.snapshot import GpuMode, Node, NodeUsage, Workload
from optsched.topology.best_effort import Board, best_effort
from tests.builders import node, pods, snapshot, workload
from tests.solver.helpers import plan_for

SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)
PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7))


def with_numa(n: Node, **update: object) -> Node:
    return n.model_copy(update={"numa": SOCKETS, **update})


def used(*gpus: int) -> dict[str, NodeUsage]:
    return {"n1": NodeUsage(gpu_milli=tuple(1000 if g in gpus else 0 for g in range(8)))}


def pods_in_order(plan: Plan, workloads: Sequence[Workload]) -> list[tuple[int, PodPlacement]]:
    """Every planned pod with its size, biggest first, then the workloads' queue order, then pod index."""
    queue = sorted(workloads, key=lambda w: w.queue_key)
    out = []
    for rank, w in enumerate(queue):
        decision = plan.decision(w.key)
        assert decision is not None and decision.pod_sets, f"{w.key} is not admitted"
        out += [(w.pod_sets[0].request.gpus, rank, pod) for pod in decision.pod_sets[0].pods]
    out.sort(key=lambda item: (-item[0], item[1], item[2].index))
    return [(size, pod) for size, _, pod in out]


def best_effort_sequence(board: Board, free: Sequence[int], sizes: Sequence[int]) -> list[tuple[int, ...]]:
    left, picks = list(free), []
    for size in sizes:
        pick = best_effort(left, size, board)
        picks.append(pick)
        left = [g for g in left if g not in pick]
    return picks


def test_on_a_bridged_a100_node_the_plan_is_the_best_effort_sequence() -> None:
    jobs = [
        workload("one", pods(1, 1), priority=5),
        workload("ddp", pods(1, 4)),
        workload("pair", pods(1, 2), priority=1),
    ]
    snap = snapshot([with_numa(node("n1", islands=[list(p) for p in PAIRS]))], jobs, usage=used(2))
    plan = plan_for(snap)
    planned = pods_in_order(plan, jobs)
    board = Board(8, PAIRS, SOCKETS)
    expected = best_effort_sequence(board, [0, 1, 3, 4, 5, 6, 7], [size for size, _ in planned])
    assert [pod.gpus for _, pod in planned] == expected
    assert all(pod.enforcement != Enforcement.NONE for _, pod in planned)


def test_on_an_nvswitch_node_the_plan_is_the_best_effort_sequence() -> None:
    jobs = [
        workload("three", pods(1, 3)),
        workload("two", pods(1, 2), priority=2),
        workload("one", pods(2, 1)),
    ]
    snap = snapshot([with_numa(node("n1"))], jobs, usage=used(4))
    plan = plan_for(snap)
    planned = pods_in_order(plan, jobs)
    board = Board(8, (tuple(range(8)),), SOCKETS)
    expected = best_effort_sequence(board, [0, 1, 2, 3, 5, 6, 7], [size for size, _ in planned])
    assert [pod.gpus for _, pod in planned] == expected
    assert all(pod.enforcement != Enforcement.NONE for _, pod in planned)


def test_a_required_island_the_prediction_would_break_is_kept_and_not_enforced() -> None:
    # (0,1) is the only whole pair: the required pod needs it, the first pod's pick would take it.
    jobs = [workload("first", pods(1, 2), priority=5), workload("needs", pods(1, 2, nvlink_required=True))]
    snap = snapshot([with_numa(node("n1", islands=[list(p) for p in PAIRS]))], jobs, usage=used(3, 5, 6, 7))
    plan = plan_for(snap)
    (_, first), (_, needs) = pods_in_order(plan, jobs)
    assert needs.gpus == (0, 1) and first.gpus == (2, 4)
    assert needs.enforcement == first.enforcement == Enforcement.NONE


def test_hami_and_dra_nodes_keep_the_island_choice_and_unknown_indices_stay_unknown() -> None:
    jobs = [workload("one", pods(1, 1))]
    islands = [list(p) for p in PAIRS]
    # The tightest island with room is (2,3); NVIDIA's pick would be GPU 0.
    assert best_effort([0, 1, 3, 4, 5, 6, 7], 1, Board(8, PAIRS, SOCKETS)) == (0,)
    for n1, enforced in (
        (with_numa(node("n1", islands=islands), hami=True), Enforcement.NONE),  # HAMi hands GPUs out
        (with_numa(node("n1", islands=islands), gpu_mode=GpuMode.DRA), Enforcement.NONE),  # no UUIDs here
    ):
        [(_, pod)] = pods_in_order(plan_for(snapshot([n1], jobs, usage=used(2))), jobs)
        assert pod.gpus == (3,) and pod.node_order is None and pod.enforcement == enforced
    blind = snapshot(
        [with_numa(node("n1", islands=islands))], jobs, usage={"n1": NodeUsage(unknown_index_gpus=1)}
    )
    [(_, pod)] = pods_in_order(plan_for(blind), jobs)
    assert pod.gpus is None
