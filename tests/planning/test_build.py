"""build_plan: one decision per pending workload, and a summary computed by hand."""

from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.model.plan import PlanStatus
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import HeldWorkload, NodeUsage
from optsched.planning.build import build_plan
from tests.builders import A100, pods, snapshot, workload
from tests.builders import node as make_node


def admit(pods_: dict[str, list[tuple[str, tuple[int, ...] | None]]]) -> WorkloadAssignment:
    return WorkloadAssignment(
        pods={
            ps: [PodPlacement(index=i, node=n, gpus=g) for i, (n, g) in enumerate(placed)]
            for ps, placed in pods_.items()
        },
        flavors=dict.fromkeys(pods_),
    )


def test_every_pending_workload_gets_a_decision_in_queue_order() -> None:
    snap = snapshot(
        [make_node("n1")],
        [
            workload("late", pods(1, 8), age=1),
            workload("early", pods(2, 2), age=50),
            workload("vip", pods(1, 8), priority=9),
        ],
    )
    placement = Placement(admitted={"default/early": admit({"main": [("n1", (0, 1)), ("n1", (2, 3))]})})
    plan = build_plan(
        snap,
        placement,
        status=PlanStatus.FEASIBLE,
        policy="optimizer",
        solve_seconds=1.5,
        objective={"priority": 1.0},
        bound=4.0,
        gap=0.0,
        warnings=["solver: hint rejected"],
        beyond_window=["default/vip"],
    )
    assert [w.name for w in plan.workloads] == ["default/vip", "default/early", "default/late"]
    early = plan.decision("default/early")
    assert early is not None and early.decision == "admit" and early.gpus == 4.0
    assert [(p.index, p.node, p.gpus) for p in early.pod_sets[0].pods] == [
        (0, "n1", (0, 1)),
        (1, "n1", (2, 3)),
    ]
    vip = plan.decision("default/vip")
    assert vip is not None and vip.decision == "defer"
    assert vip.reasons[0].message == "beyond the planning window"
    assert vip.reasons[0].code == "BeyondPlanningWindow"
    late = plan.decision("default/late")
    assert late is not None and late.decision == "defer" and late.reasons and late.pod_sets == []
    assert (plan.status, plan.policy, plan.solve_seconds, plan.bound, plan.gap) == (
        PlanStatus.FEASIBLE,
        "optimizer",
        1.5,
        4.0,
        0.0,
    )
    assert plan.objective == {"priority": 1.0}
    assert plan.warnings == ["solver: hint rejected"]


def test_summary_arithmetic_matches_a_hand_computed_case() -> None:
    # n1: 8 H100, GPU 0 half used by a running share.  n2: 4 H100, GPU 3 unhealthy.
    # Queue: one 4-GPU shape.  Admitted: one 4-GPU pod of a minCount-1 gang on n1 GPUs 4-7.
    snap = snapshot(
        [make_node("n1"), make_node("n2", gpus=4, unhealthy=frozenset({3}))],
        [workload("job", pods(2, 4, min_count=1))],
        usage={"n1": NodeUsage(gpu_milli=(500,) + (0,) * 7, gpu_mem_mib=(1000,) + (0,) * 7)},
    )
    placement = Placement(admitted={"default/job": admit({"main": [("n1", (4, 5, 6, 7))]})})
    summary = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="bestfit").summary
    assert summary.gpus_total == 11
    assert (summary.gpus_free_before, summary.gpus_allocated_before) == (10.5, 0.5)
    assert (summary.gpus_free_after, summary.gpus_allocated_after) == (6.5, 4.5)
    assert summary.gpus_admitted == 4.0
    # Before: n1 can run the shape, only GPU 0's free half is unusable (0.5); n2 (3 whole) cannot (3).
    assert summary.fragmentation_before == 3.5
    # After: n1 has GPU 0's half plus 3 whole GPUs and cannot run the shape (3.5); n2 still 3.
    assert summary.fragmentation_after == 6.5
    assert (summary.stranded_gpus_before, summary.stranded_gpus_after) == (3, 6)
    assert (summary.workloads_admitted, summary.workloads_deferred, summary.pods_admitted) == (1, 0, 1)
    assert (summary.multi_gpu_pods, summary.multi_gpu_pods_in_one_island) == (1, 1)
    assert summary.racks_per_gang == 0.0
    (h100,) = summary.by_product
    assert (h100.gpus_total, h100.gpus_free_before, h100.gpus_free_after) == (11, 10.5, 6.5)


def test_racks_islands_and_products_in_the_summary() -> None:
    snap = snapshot(
        [
            make_node("a", rack="r1", gpus=4, islands=[[0, 1], [2, 3]]),
            make_node("b", rack="r2", gpus=4, islands=[[0, 1], [2, 3]]),
            make_node("t", product=A100, gpus=2),
        ],
        [workload("gang", pods(2, 2)), workload("solo", pods(1, 2))],
    )
    placement = Placement(
        admitted={
            "default/gang": admit({"main": [("a", (0, 1)), ("b", (1, 2))]}),
            "default/solo": admit({"main": [("t", (0, 1))]}),
        }
    )
    summary = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="x").summary
    assert summary.racks_per_gang == 2.0
    # (0,1) on a is one island, (1,2) on b spans two islands, t is one island of two GPUs.
    assert (summary.multi_gpu_pods, summary.multi_gpu_pods_in_one_island) == (3, 2)
    assert [p.product for p in summary.by_product] == [A100, "NVIDIA-H100-80GB-HBM3"]
    assert [p.gpus_free_after for p in summary.by_product] == [0.0, 4.0]


def test_unknown_indices_and_unknown_names() -> None:
    snap = snapshot(
        [make_node("n1")], [workload("job", pods(1, 2))], usage={"n1": NodeUsage(unknown_index_gpus=2)}
    )
    placement = Placement(
        admitted={
            "default/job": admit({"main": [("n1", None)]}),
            "default/ghost": admit({"main": [("n1", None)]}),
        }
    )
    plan = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="x")
    job = plan.decision("default/job")
    assert job is not None and job.pod_sets[0].pods[0].gpus is None
    assert plan.summary.gpus_free_after == 4.0
    assert plan.decision("default/ghost") is None
    assert any("default/ghost" in w for w in plan.warnings)


def test_empty_placement_defers_everything_with_reasons() -> None:
    snap = snapshot([make_node("n1", gpus=4)], [workload("big", pods(1, 8))])
    plan = build_plan(snap, Placement(), status=PlanStatus.HEURISTIC, policy="x")
    (decision,) = plan.workloads
    assert decision.decision == "defer"
    assert [r.message for r in decision.reasons] == [
        "pod set main: a pod needs 8 GPUs; the largest node its filters allow (n1) has 4 GPUs, "
        "so it can never fit"
    ]
    assert plan.summary.gpus_free_before == plan.summary.gpus_free_after == 4.0


def test_each_decision_carries_the_node_filter_diagnosis() -> None:
    t4 = make_node("t4-01", gpus=2, product="Tesla-T4")
    snap = snapshot(
        [make_node("n1"), make_node("n2", unhealthy=frozenset({3})), t4],
        [workload("big", pods(1, 8)), workload("small", pods(1, 1))],
    )
    placement = Placement(admitted={"default/small": admit({"main": [("t4-01", (0,))]})})
    plan = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="x")
    big, small = plan.decision("default/big"), plan.decision("default/small")
    assert big is not None and small is not None
    assert [(e.pod_set, e.flavor, e.eligible, e.excluded) for e in big.eligibility] == [
        ("main", None, 1, {"has 7 healthy GPUs, pod needs 8": 1, "has 2 healthy GPUs, pod needs 8": 1})
    ]
    assert [(e.eligible, e.excluded) for e in small.eligibility] == [(3, {})]


def test_held_workloads_are_deferred_with_kueues_reason_in_queue_order_and_counted() -> None:
    held_reason = Reason(
        code=ReasonCode.CLUSTER_QUEUE_NOT_FOUND,
        message="ClusterQueue gone doesn't exist",
        scope="ClusterQueue gone",
    )
    snap = snapshot(
        [make_node("n1")],
        [workload("late", pods(1, 8), age=1), workload("early", pods(1, 2), age=50)],
    ).model_copy(
        update={"held": (HeldWorkload(workload=workload("middle", pods(1, 1), age=10), reason=held_reason),)}
    )
    placement = Placement(admitted={"default/early": admit({"main": [("n1", (0, 1))]})})
    plan = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="bestfit")
    assert [(d.name, d.decision) for d in plan.workloads] == [
        ("default/early", "admit"),
        ("default/middle", "defer"),
        ("default/late", "defer"),
    ]
    assert plan.decision("default/middle").reasons == [held_reason]  # type: ignore[union-attr]
    assert (plan.summary.workloads_admitted, plan.summary.workloads_deferred) == (1, 2)
