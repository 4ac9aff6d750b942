"""The device-plugin prediction: picks in order, the island promise kept, and nodes it leaves alone."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.capacity.baseline import Baseline
from optsched.capacity.prediction import predict_placement
from optsched.capacity.state import ClusterState
from optsched.model.placement import Enforcement, Placement, PodPlacement, WorkloadAssignment
from optsched.model.snapshot import GpuMode, Node, NodeUsage, Snapshot, Workload
from optsched.topology.best_effort import Board, best_effort
from tests.builders import node, pods, snapshot, workload

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]
SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)
A100_BOARD = Board(8, ((0, 1), (2, 3), (4, 5), (6, 7)), SOCKETS)


def bridged(name: str = "n1", **update: object) -> Node:
    return node(name, islands=PAIRS).model_copy(update={"numa": SOCKETS, **update})


def used(*gpus: int) -> dict[str, NodeUsage]:
    return {"n1": NodeUsage(gpu_milli=tuple(1000 if g in gpus else 0 for g in range(8)))}


def placed(snap: Snapshot, gpus: Sequence[Sequence[int] | None]) -> Placement:
    """Each workload's single pod on n1 with the given GPUs, as a policy placed it."""
    placement = Placement()
    for w, chosen in zip(snap.workloads, gpus, strict=True):
        pod = PodPlacement(index=0, node="n1", gpus=None if chosen is None else tuple(chosen))
        placement.admitted[w.key] = WorkloadAssignment(pods={"main": [pod]}, flavors={"main": None})
    return placement


def predicted(snap: Snapshot, placement: Placement) -> list[PodPlacement]:
    state = ClusterState.from_snapshot(snap)
    out = predict_placement(placement, snap.workloads, state.by_name)
    return [out.admitted[w.key].pods["main"][0] for w in snap.workloads]


def pair(name: str, *, required: bool = False, priority: int = 0) -> Workload:
    return workload(name, pods(1, 2, nvlink_required=required), priority=priority)


def test_pods_take_the_best_effort_picks_biggest_first_then_queue_order() -> None:
    snap = snapshot(
        [bridged()],
        [
            workload("one", pods(1, 1), priority=9),
            workload("four", pods(1, 4)),
            workload("two", pods(1, 2), priority=5),
        ],
        usage=used(2),
    )
    got = predicted(snap, placed(snap, [[3], [4, 5, 6, 7], [0, 1]]))
    free = [0, 1, 3, 4, 5, 6, 7]
    four = best_effort(free, 4, A100_BOARD)
    two = best_effort([g for g in free if g not in four], 2, A100_BOARD)
    one = best_effort([g for g in free if g not in four + two], 1, A100_BOARD)
    assert [p.gpus for p in got] == [one, four, two]
    assert all(p.enforcement is None for p in got)  # the plan builder labels them predicted
    assert [p.node_order for p in got] == [2, 0, 1], "the order the controller hands GPUs out in"


def test_a_required_island_the_picks_would_break_ends_the_prediction_on_that_node() -> None:
    # Picks in order: (0,1), then (2,3) for the pod that needs no island, leaving (4,6) for the last.
    snap = snapshot(
        [bridged()],
        [pair("a", required=True, priority=3), pair("b", priority=2), pair("c", required=True, priority=1)],
        usage=used(5, 7),
    )
    a, b, c = predicted(snap, placed(snap, [[0, 1], [4, 6], [2, 3]]))
    assert a.gpus == best_effort([0, 1, 2, 3, 4, 6], 2, A100_BOARD) == (0, 1)
    assert a.enforcement is None
    assert c.gpus in {(2, 3), (4, 5), (6, 7)} and c.enforcement == Enforcement.NONE
    assert b.enforcement == Enforcement.NONE  # the first pod off its pick: the node's free set differs after
    assert b.gpus is not None and c.gpus is not None
    assert (a.node_order, b.node_order, c.node_order) == (0, 1, 2), "unpredicted pods still come after"
    assert len({*a.gpus, *b.gpus, *c.gpus}) == 6 and {*b.gpus, *c.gpus} <= {2, 3, 4, 6}


def test_where_no_predicted_pod_keeps_the_promise_the_policys_sets_stay_unenforced() -> None:
    snap = snapshot(
        [bridged()], [pair("first", priority=1), pair("needs", required=True)], usage=used(3, 5, 6, 7)
    )
    first, needs = predicted(snap, placed(snap, [[2, 4], [0, 1]]))
    assert (first.gpus, needs.gpus) == ((2, 4), (0, 1))
    assert first.enforcement == needs.enforcement == Enforcement.NONE


def test_a_pick_that_keeps_as_many_pods_in_islands_is_taken() -> None:
    # The policy had one of two pairs in an island; the picks have one too, just the other pod.
    snap = snapshot([bridged()], [pair("first", priority=1), pair("second")], usage=used(3, 5, 6, 7))
    first, second = predicted(snap, placed(snap, [[2, 4], [0, 1]]))
    assert (first.gpus, second.gpus) == ((0, 1), (2, 4))
    assert first.enforcement is None and second.enforcement is None


def test_gpus_the_plan_gives_shares_are_not_free_for_the_picks() -> None:
    snap = snapshot(
        [bridged()], [workload("share", pods(1, 1, gpu_milli=500)), workload("whole", pods(1, 1))]
    )
    share, whole = predicted(snap, placed(snap, [[0], [7]]))
    assert share.gpus == (0,)
    assert whole.gpus == best_effort(range(1, 8), 1, A100_BOARD) == (1,)


def test_hami_dra_and_index_unknown_nodes_are_left_alone() -> None:
    jobs = [workload("whole", pods(1, 1))]
    for n1, usage in [
        (bridged(hami=True), used(2)),
        (bridged(gpu_mode=GpuMode.DRA), used(2)),
        (bridged(), {"n1": NodeUsage(unknown_index_gpus=1)}),
    ]:
        snap = snapshot([n1], jobs, usage=usage)
        placement = placed(snap, [[3]])
        [pod] = predicted(snap, placement)
        assert pod.gpus == (3,) and pod.enforcement is None


def test_a_node_with_a_gpu_pod_of_unknown_indices_predicts_nothing() -> None:
    snap = snapshot([bridged()], [workload("left", pods(1, 1)), workload("whole", pods(1, 1))])
    left, whole = predicted(snap, placed(snap, [None, [3]]))
    assert left.gpus is None and left.enforcement is None
    assert whole.gpus == (3,) and whole.enforcement == Enforcement.NONE
    assert whole.node_order is None, "nothing predicted there: no order to keep"


def test_a_pod_whose_containers_split_its_gpus_predicts_nothing_on_its_node() -> None:
    # The device plugin picks for each container on its own: a pod-wide pick is no prediction.
    split = pods(1, 2)
    split = split.model_copy(update={"request": split.request.model_copy(update={"split_gpus": True})})
    snap = snapshot([bridged()], [workload("split", split), workload("whole", pods(1, 2))])
    first, second = predicted(snap, placed(snap, [[0, 1], [2, 3]]))
    assert (first.gpus, second.gpus) == ((0, 1), (2, 3))
    assert first.enforcement == second.enforcement == Enforcement.NONE


def test_the_baseline_start_state_carries_the_board() -> None:
    snap = snapshot([bridged(), bridged("n2", hami=True), node("cpu", gpus=0)], [])
    boards = {s.name: s.board for s in Baseline.reuse(snap, None).state.nodes}
    assert boards == {"n1": A100_BOARD, "n2": None, "cpu": None}
    assert ClusterState.from_snapshot(snap).by_name["n1"].copy().board == A100_BOARD


@st.composite
def node_plans(draw: st.DrawFn) -> tuple[Snapshot, Placement]:
    """A bridged or switched node, some GPUs busy, and 1..5 single-pod workloads a policy placed there."""
    islands = draw(st.sampled_from([PAIRS, [list(range(8))], [[0, 1, 2, 3], [4, 5, 6, 7]]]))
    busy = draw(st.sets(st.integers(0, 7), max_size=4))
    free = set(range(8)) - busy
    jobs, gpus = [], []
    for i in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        required = size >= 2 and draw(st.booleans())
        fitting = [sorted(free & set(island)) for island in islands if len(free & set(island)) >= size]
        if (required and not fitting) or size > len(free):
            continue
        chosen = min(fitting)[:size] if required else sorted(draw(st.permutations(sorted(free))))[:size]
        free -= set(chosen)
        jobs.append(
            workload(f"w{i}", pods(1, size, nvlink_required=required), priority=draw(st.integers(0, 2)))
        )
        gpus.append(chosen)
    n1 = node("n1", islands=[list(i) for i in islands]).model_copy(update={"numa": SOCKETS})
    snap = snapshot([n1], jobs, usage=used(*busy))
    return snap, placed(snap, gpus)


def _in_island(n1: Node, gpus: Sequence[int]) -> bool:
    return any(set(gpus) <= set(island) for island in n1.nvlink_islands)


@given(node_plans())
@settings(max_examples=150, deadline=None)
def test_the_prediction_never_over_commits_and_keeps_every_island_promise(
    case: tuple[Snapshot, Placement],
) -> None:
    snap, placement = case
    [n1] = snap.nodes
    start = ClusterState.from_snapshot(snap).nodes[0]
    assert start.board is not None
    before = [placement.admitted[w.key].pods["main"][0] for w in snap.workloads]
    after = predicted(snap, placement)
    sizes = [w.pod_sets[0].request.gpus for w in snap.workloads]
    assert [len(pod.gpus or ()) for pod in after] == sizes
    taken = [g for pod in after for g in pod.gpus or ()]
    assert len(taken) == len(set(taken)) and set(taken) <= set(start.fully_free_gpus())
    for w, pod in zip(snap.workloads, after, strict=True):
        if w.pod_sets[0].nvlink_required:
            assert _in_island(n1, pod.gpus or ())
    for size in set(sizes) - {1}:
        inside = [
            sum(1 for p, s in zip(pods_, sizes, strict=True) if s == size and _in_island(n1, p.gpus or ()))
            for pods_ in (before, after)
        ]
        assert inside[1] >= inside[0]
    # In the prediction order, pods are the best-effort sequence until the first one marked none.
    order = sorted(range(len(after)), key=lambda i: (-sizes[i], snap.workloads[i].queue_key))
    left = list(start.fully_free_gpus())
    for n, i in enumerate(order):
        if after[i].enforcement == Enforcement.NONE:
            assert all(after[j].enforcement == Enforcement.NONE for j in order[n:])
            break
        pick = best_effort(left, sizes[i], start.board)
        assert after[i].gpus == pick
        left = [g for g in left if g not in pick]
