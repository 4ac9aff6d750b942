"""check_plan on MIG layout changes: a valid repartition passes; each way of breaking one is named."""

from __future__ import annotations

import pytest

from optsched.model.mig import MigChange, MigGpu, MigInstanceState, slots
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import Node, NodeUsage, Snapshot
from optsched.validate import check_plan
from tests.builders import H100, node, pods, snapshot, workload

ONE_G = "nvidia.com/mig-1g.10gb"
THREE_G = "nvidia.com/mig-3g.40gb"
SEVEN_1G = tuple(("1g.10gb", s) for s in range(7))
AFTER = (("3g.40gb", 4), *(("1g.10gb", s) for s in range(4)))
"""7x1g.10gb -> 3g.40gb@4 + 4x1g.10gb@0..3: the 3g takes slices 4..7 the 1g at 4, 5 and 6 held."""


def mig_node(
    name: str = "h1",
    *,
    layout: tuple[tuple[str, int], ...] = SEVEN_1G,
    in_use: frozenset[int] = frozenset(),
    hold: str = "",
) -> Node:
    """An H100 node whose GPU 0 is MIG-enabled with ``layout`` (instances at ``in_use`` starts held)."""
    instances = tuple(
        MigInstanceState(profile=p, start=s, uuid=f"MIG-{p}-{s}", in_use=s in in_use) for p, s in layout
    )
    gpu = MigGpu(index=0, uuid="GPU-h1-0", model="H100-80GB", instances=instances, hold=hold)
    extended: dict[str, int] = {}
    for profile, _ in layout:
        key = f"nvidia.com/mig-{profile}"
        extended[key] = extended.get(key, 0) + 1
    base = node(name, gpus=1, product=H100, extended=extended)
    return base.model_copy(update={"mig_gpus": (gpu,)})


def notebook_snapshot(
    *,
    n: int = 1,
    usage: dict[str, NodeUsage] | None = None,
    in_use: frozenset[int] = frozenset(),
    hold: str = "",
) -> Snapshot:
    """Node h1 (7x1g.10gb) and ``n`` pending workloads of one pod asking for a 3g.40gb."""
    jobs = [workload(f"nb{i}", pods(1, 0, extended={THREE_G: 1})) for i in range(n)]
    return snapshot([mig_node(in_use=in_use, hold=hold)], jobs, usage=usage)


def admit(name: str, node_: str = "h1", *, waits: bool = True) -> WorkloadDecision:
    return WorkloadDecision(
        name=f"default/{name}",
        decision="admit",
        pod_sets=[PodSetPlacement(name="main", pods=[PodPlacement(index=0, node=node_, gpus=[])])],
        waits_for_layout=[node_] if waits else [],
    )


def change(
    to: tuple[tuple[str, int], ...] = AFTER,
    *,
    from_: tuple[tuple[str, int], ...] = SEVEN_1G,
    node_: str = "h1",
    gpu: int = 0,
    uuid: str = "GPU-h1-0",
) -> MigChange:
    return MigChange(node=node_, gpu=gpu, uuid=uuid, from_=slots(from_), to=slots(to))


def plan(*decisions: WorkloadDecision, changes: tuple[MigChange, ...] = (change(),)) -> Plan:
    return Plan(
        status=PlanStatus.HEURISTIC, policy="test", workloads=list(decisions), mig_changes=list(changes)
    )


def one(snap: Snapshot, p: Plan) -> str:
    violations = check_plan(snap, p)
    assert len(violations) == 1, violations
    return violations[0]


def test_a_repartition_that_serves_the_waiting_pod_is_valid() -> None:
    assert check_plan(notebook_snapshot(), plan(admit("nb0"))) == []


def test_without_the_change_the_slice_does_not_exist() -> None:
    message = one(notebook_snapshot(), plan(admit("nb0", waits=False), changes=()))
    assert message == f"node h1: {THREE_G} over-committed (plan takes 1, 0 free)"


def test_pods_count_against_the_new_layout() -> None:
    snap = notebook_snapshot(n=2)
    message = one(snap, plan(admit("nb0"), admit("nb1")))
    assert message == (
        f"node h1: {THREE_G} over-committed (plan takes 2, 1 free after the plan's MIG layout changes (+1))"
    )


def test_instances_running_pods_hold_are_counted_where_a_change_removes_some() -> None:
    # Five 1g.10gb run (without in-use flags, as a stale agent report would show); the change keeps four.
    snap = notebook_snapshot(n=0, usage={"h1": NodeUsage(extended={ONE_G: 5})})
    message = one(snap, plan())
    assert message == (
        f"node h1: {ONE_G}: running pods hold 5, the node has 4 after the plan's MIG layout changes (-3)"
    )


def test_an_overlapping_layout_is_rejected() -> None:
    snap = notebook_snapshot()
    bad = (("3g.40gb", 4), ("1g.10gb", 0), ("1g.10gb", 4))
    message = one(snap, plan(admit("nb0"), changes=(change(bad),)))
    assert message.startswith("MIG change on node h1 GPU 0: 'to' is not a legal H100-80GB layout: ")
    assert "1g.10gb at start 4 and 3g.40gb at start 4 overlap on memory slice 4" in message


def test_a_misplaced_instance_is_rejected() -> None:
    snap = notebook_snapshot()
    bad = (("3g.40gb", 2), ("1g.10gb", 0), ("1g.10gb", 1))
    message = one(snap, plan(admit("nb0"), changes=(change(bad),)))
    assert message == (
        "MIG change on node h1 GPU 0: 'to' is not a legal H100-80GB layout: 3g.40gb at start 2: "
        "3g.40gb cannot start at memory slice 2 on H100-80GB (allowed starts: 0, 4)"
    )


def test_an_instance_past_the_last_slice_and_over_the_cap_are_rejected() -> None:
    snap = notebook_snapshot(n=0)
    bad = (("1g.10gb+me", 0), ("1g.10gb+me", 1), ("4g.40gb", 6))
    violations = check_plan(snap, plan(changes=(change(bad),)))
    assert any(
        "4g.40gb at start 6: it would occupy memory slices 6..9, outside slices 0..7" in v for v in violations
    )
    assert any("2 instances of 1g.10gb+me: at most 1 fit on one H100-80GB" in v for v in violations)
    assert all(v.startswith("MIG change on node h1 GPU 0: ") for v in violations)


def test_a_profile_of_another_model_is_rejected() -> None:
    message = one(notebook_snapshot(n=0), plan(changes=(change((("1g.5gb", 0),)),)))
    assert "H100-80GB has no MIG profile '1g.5gb'" in message


def test_an_instance_in_use_may_not_be_destroyed_or_moved() -> None:
    # 1g.10gb at start 5 runs a pod; the new layout puts the 3g over it.
    snap = notebook_snapshot(in_use=frozenset({5}))
    message = one(snap, plan(admit("nb0")))
    assert message == (
        "MIG change on node h1 GPU 0: destroys or moves 1g.10gb@5, which a running pod holds "
        "(to: [1g.10gb@0, 1g.10gb@1, 1g.10gb@2, 1g.10gb@3, 3g.40gb@4])"
    )


def test_an_instance_in_use_that_stays_is_fine() -> None:
    assert check_plan(notebook_snapshot(in_use=frozenset({0, 3})), plan(admit("nb0"))) == []


def test_a_held_gpu_may_not_change() -> None:
    snap = notebook_snapshot(hold="its layout change to generation 3 failed: device busy")
    message = one(snap, plan(admit("nb0")))
    assert message == (
        "MIG change on node h1 GPU 0: its layout may not change now: "
        "its layout change to generation 3 failed: device busy"
    )


def test_from_must_be_the_current_layout() -> None:
    stale = SEVEN_1G[:6]
    violations = check_plan(notebook_snapshot(), plan(admit("nb0"), changes=(change(from_=stale),)))
    assert (
        "MIG change on node h1 GPU 0: 'from' is [1g.10gb@0, 1g.10gb@1, 1g.10gb@2, 1g.10gb@3, 1g.10gb@4, "
        "1g.10gb@5], but the GPU has [1g.10gb@0, 1g.10gb@1, 1g.10gb@2, 1g.10gb@3, 1g.10gb@4, 1g.10gb@5, "
        "1g.10gb@6]"
    ) in violations


def test_the_uuid_must_be_the_gpus() -> None:
    message = one(notebook_snapshot(), plan(admit("nb0"), changes=(change(uuid="GPU-other"),)))
    assert (
        message
        == "MIG change on node h1 GPU 0: plan names GPU UUID 'GPU-other', the node's GPU 0 is 'GPU-h1-0'"
    )


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (change(node_="h9"), "MIG change on node h9 GPU 0: no such node"),
        (
            change(gpu=3),
            "MIG change on node h1 GPU 3: not a MIG-enabled GPU of the node (MIG-enabled GPUs: 0)",
        ),
    ],
)
def test_the_gpu_must_be_a_mig_gpu_of_a_known_node(bad: MigChange, expected: str) -> None:
    assert check_plan(notebook_snapshot(n=0), plan(changes=(bad,))) == [expected]


def test_a_gpu_is_changed_once() -> None:
    twice = (change(), change((("7g.80gb", 0),)))
    message = one(notebook_snapshot(), plan(admit("nb0"), changes=twice))
    assert message == "MIG change on node h1 GPU 0: the plan changes this GPU more than once"


def test_a_change_that_changes_nothing_is_rejected() -> None:
    message = one(notebook_snapshot(n=0), plan(changes=(change(SEVEN_1G),)))
    assert message.endswith(
        "'to' equals 'from' " + "[" + ", ".join(f"1g.10gb@{s}" for s in range(7)) + "]: nothing changes"
    )


def test_waiting_for_a_layout_names_a_changed_node_holding_its_pods() -> None:
    snap = snapshot([mig_node("h1"), mig_node("h2")], [workload("nb0", pods(1, 0, extended={THREE_G: 1}))])
    waiting = admit("nb0").model_copy(update={"waits_for_layout": ["h1", "h2"]})
    violations = check_plan(snap, plan(waiting))
    assert violations == [
        "workload default/nb0: waits for a MIG layout on node h2, but the plan changes no layout there",
        "workload default/nb0: waits for a MIG layout on node h2, but none of its pods is placed there",
    ]


def test_a_workload_on_slices_only_the_change_creates_must_say_it_waits() -> None:
    message = one(notebook_snapshot(), plan(admit("nb0", waits=False)))
    assert message == (
        f"node h1: the plan's pods take 1 {THREE_G} (default/nb0), 0 free now, "
        "but none of these workloads waits for the node's MIG layout change"
    )


def test_a_workload_on_slices_that_exist_now_need_not_wait() -> None:
    # Two 1g.10gb pods fit the four 1g.10gb the change keeps, and also the seven there now.
    snap = snapshot([mig_node()], [workload(f"small{i}", pods(1, 0, extended={ONE_G: 1})) for i in range(2)])
    assert check_plan(snap, plan(admit("small0", waits=False), admit("small1", waits=False))) == []
