"""The MIG layout module: layouts chosen for the queue, in-use instances kept, as few changes as needed."""

from __future__ import annotations

from optsched import planning
from optsched.model.mig import MigSlotView
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, NodeUsage
from optsched.settings import ModuleSettings, ModuleSwitches, Settings
from tests.builders import pods, snapshot, workload
from tests.solver.helpers import FAST, admitted
from tests.solver.mig_builders import mig_gpu, mig_node

G1, G3, G4, G7 = (
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-4g.40gb",
    "nvidia.com/mig-7g.80gb",
)


def _mig_pod(resource: str, count: int = 1):  # type: ignore[no-untyped-def]
    return pods(count, 0, extended={resource: 1})


def _plan(nodes: list[tuple[Node, NodeUsage]], workloads: list, settings: Settings = FAST) -> Plan:  # type: ignore[type-arg]
    snap = snapshot([n for n, _ in nodes], workloads, usage={n.name: u for n, u in nodes})
    return planning.plan(snap, settings, check=False)


def _to(plan: Plan, node: str = "m1", gpu: int = 0) -> list[tuple[str, int]]:
    change = next(c for c in plan.mig_changes if c.node == node and c.gpu == gpu)
    return [(s.profile, s.start) for s in change.to]


def test_one_3g_and_four_1g_fit_an_idle_h100_only_with_the_1g_at_starts_0_to_3() -> None:
    # 3g.40gb starts at 0 or 4; 1g.10gb at 0..6. With the 3g at 0 only three 1g fit (4, 5, 6): the
    # admission stage must put the 3g at 4 and the four 1g at 0, 1, 2, 3 (compute 3 + 4 = 7).
    queue = [workload("big", _mig_pod(G3)), *(workload(f"small{i}", _mig_pod(G1)) for i in range(4))]
    plan = _plan([mig_node("m1", mig_gpu(0))], queue)
    assert admitted(plan) == {"big", "small0", "small1", "small2", "small3"}
    assert sorted(_to(plan)) == [
        ("1g.10gb", 0),
        ("1g.10gb", 1),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
        ("3g.40gb", 4),
    ]
    change = plan.mig_changes[0]
    assert change.from_ == () and change.uuid == "GPU-0"
    assert all(w.waits_for_layout == ["m1"] for w in plan.admitted)


def test_instances_in_use_stay_where_they_are() -> None:
    # A 1g in use at slice 3 leaves the 3g only start 4, and no 7g at all.
    gpu = mig_gpu(0, ("1g.10gb", 3, True), ("1g.10gb", 0))
    plan = _plan([mig_node("m1", gpu)], [workload("whole", _mig_pod(G7)), workload("half", _mig_pod(G3))])
    assert admitted(plan) == {"half"}
    layout = _to(plan)
    assert ("1g.10gb", 3) in layout and ("3g.40gb", 4) in layout


def test_an_instance_that_exists_is_used_before_any_gpu_is_changed() -> None:
    nodes = [mig_node("m1", mig_gpu(0, ("1g.10gb", 0)), mig_gpu(1))]
    plan = _plan(nodes, [workload("a", _mig_pod(G1))])
    assert admitted(plan) == {"a"} and plan.mig_changes == []
    assert plan.admitted[0].waits_for_layout == []


def test_only_as_many_gpus_change_as_the_queue_needs() -> None:
    nodes = [mig_node("m1", *(mig_gpu(i) for i in range(4)))]
    # Two 3g take all eight memory slices of a GPU, so 2 x 3g + 3 x 1g need two GPUs (3g + 3 x 1g, 3g).
    plan = _plan(nodes, [workload("a", _mig_pod(G3, 2)), workload("b", _mig_pod(G1, 3))])
    assert admitted(plan) == {"a", "b"}
    assert len(plan.mig_changes) == 2
    assert sum(len(c.to) for c in plan.mig_changes) == 5  # no instance beyond what the queue asks
    plan = _plan(nodes, [workload("a", _mig_pod(G3)), workload("b", _mig_pod(G1, 3))])
    assert len(plan.mig_changes) == 1 and len(plan.mig_changes[0].to) == 4


def test_a_held_gpu_is_never_changed() -> None:
    nodes = [mig_node("m1", mig_gpu(0, hold="a MIG layout change is in flight (Applying)"))]
    plan = _plan(nodes, [workload("a", _mig_pod(G1))])
    assert admitted(plan) == set() and plan.mig_changes == []


def test_switched_off_keeps_every_layout() -> None:
    off = FAST.model_copy(update={"modules": ModuleSwitches(mig=ModuleSettings(enabled=False))})
    plan = _plan([mig_node("m1", mig_gpu(0))], [workload("a", _mig_pod(G1))], off)
    assert admitted(plan) == set() and plan.mig_changes == []
    assert (
        planning.plan(
            snapshot([mig_node("m1", mig_gpu(0))[0]], [workload("a", _mig_pod(G1))]),
            policy="bestfit",
            check=False,
        ).mig_changes
        == []
    )


def test_instances_that_exist_go_to_the_queue_head_and_the_rest_wait_for_the_layout() -> None:
    # GPU 0 is full (six 1g in use, one free); the second 1g needs a new instance on GPU 1.
    full = mig_gpu(0, *(("1g.10gb", s, s > 0) for s in range(7)))
    nodes = [mig_node("m1", full, mig_gpu(1))]
    plan = _plan(nodes, [workload("first", _mig_pod(G1)), workload("second", _mig_pod(G1))])
    waits = {w.name: w.waits_for_layout for w in plan.admitted}
    assert waits == {"default/first": [], "default/second": ["m1"]}
    assert [c.gpu for c in plan.mig_changes] == [1]


def test_nothing_is_handed_out_from_a_gpu_whose_layout_changes() -> None:
    # GPU 0's free 1g goes when it becomes a 7g. GPU 1's free 1g could serve the 1g pod at once, but
    # the device plugin could as well give it GPU 0's, so that pod waits for the layout too.
    nodes = [mig_node("m1", mig_gpu(0, ("1g.10gb", 0)), mig_gpu(1, ("1g.10gb", 0, True), ("1g.10gb", 1)))]
    plan = _plan(nodes, [workload("whole", _mig_pod(G7)), workload("small", _mig_pod(G1))])
    assert admitted(plan) == {"whole", "small"}
    assert [c.gpu for c in plan.mig_changes] == [0]
    assert all(w.waits_for_layout == ["m1"] for w in plan.admitted)


def test_fragmentation_keeps_free_slices_in_the_shapes_pods_run_in() -> None:
    # Pods hold 1g.20gb instances (two memory slices, starts 0, 2, 4, 6) elsewhere. Two new 1g.10gb
    # instances (one slice each) on an idle H100 should sit in one aligned pair (0-1, 2-3 or 4-5), so
    # the other six slices still hold three 1g.20gb; at 5 and 6 they would strand slices 4 and 7.
    full = mig_gpu(0, *(("1g.20gb", start, True) for start in (0, 2, 4, 6)))
    for seed in range(4):
        settings = FAST.model_copy(update={"random_seed": seed})
        plan = _plan(
            [mig_node("m1", mig_gpu(0)), mig_node("m2", full)], [workload("a", _mig_pod(G1, 2))], settings
        )
        assert admitted(plan) == {"a"}
        starts = sorted(start for _, start in _to(plan))
        assert len(starts) == 2 and starts[0] % 2 == 0 and starts[1] == starts[0] + 1, (seed, starts)
        assert MigSlotView(profile="1g.10gb", start=starts[0]) in plan.mig_changes[0].to


def test_a_kept_free_instance_is_handed_out_at_once() -> None:
    # The change keeps the free 1g at 0 and adds a 3g at 4: the 1g workload need not wait.
    nodes = [mig_node("m1", mig_gpu(0, ("1g.10gb", 0)))]
    plan = _plan(nodes, [workload("a1g", _mig_pod(G1)), workload("b3g", _mig_pod(G3))])
    assert admitted(plan) == {"a1g", "b3g"} and _to(plan) == [("1g.10gb", 0), ("3g.40gb", 4)]
    waits = {w.name: w.waits_for_layout for w in plan.admitted}
    assert waits == {"default/a1g": [], "default/b3g": ["m1"]}


def test_the_free_instances_of_a_gpu_whose_change_is_in_flight_are_not_handed_out() -> None:
    changing = mig_gpu(
        0, ("1g.10gb", 0), ("1g.10gb", 1), hold="a MIG layout change is in flight", changing=True
    )
    plan = _plan([mig_node("m1", changing)], [workload("a", _mig_pod(G1))])
    assert admitted(plan) == set() and plan.mig_changes == []
    greedy = planning.plan(
        snapshot([mig_node("m1", changing)[0]], [workload("a", _mig_pod(G1))]), policy="bestfit"
    )
    assert greedy.admitted == []


def test_a_new_layout_keeps_as_many_instances_as_running_pods_use_even_unmarked() -> None:
    # Usage says a pod holds a 1g, but the agent has not flagged it in use: the 1g stays.
    node, _ = mig_node("m1", mig_gpu(0, ("1g.10gb", 0)))
    usage = NodeUsage(extended={G1: 1})
    plan = _plan([(node, usage)], [workload("big", _mig_pod(G4))])
    assert admitted(plan) == {"big"}
    assert sum(1 for p, _ in _to(plan) if p == "1g.10gb") == 1


def test_a_mig_workload_a_new_layout_could_serve_is_never_called_impossible() -> None:
    # One idle H100: the 7g goes first (priority); the 3g waits for capacity, not forever.
    plan = _plan(
        [mig_node("m1", mig_gpu(0))],
        [workload("big", _mig_pod(G7), priority=10), workload("half", _mig_pod(G3))],
    )
    assert admitted(plan) == {"big"}
    half = plan.decision("default/half")
    assert half is not None and half.reasons and not any(r.permanent for r in half.reasons), half.reasons


def test_the_gpus_a_plan_may_change_are_those_its_queue_can_use() -> None:
    # Only the second node matches the 3g's nodeSelector; with room to change one GPU, it is that node's.
    first, second = mig_node("m1", mig_gpu(0)), mig_node("m2", mig_gpu(0))
    picky = workload("w", pods(1, 0, extended={G3: 1}, node_selector={"kubernetes.io/hostname": "m2"}))
    one = FAST.model_copy(update={"mig_changeable_gpus": 1})
    plan = _plan([first, second], [picky], one)
    assert admitted(plan) == {"w"} and [c.node for c in plan.mig_changes] == ["m2"]
