"""Deferral reasons: each blocking constraint named, with the numbers, on the smallest case."""

from optsched.capacity.state import ClusterState
from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.model.plan import PlanStatus
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import (
    ClusterQueue,
    LocalQueue,
    NodeUsage,
    ResourceFlavor,
    Snapshot,
    Taint,
    Workload,
)
from optsched.planning.build import build_plan
from optsched.planning.reasons import PlanContext, explain_deferral
from tests.builders import RACK, gpu_queue, node, pods, snapshot, workload


def found(snap: Snapshot, wl: Workload) -> list[Reason]:
    return explain_deferral(snap, wl, ClusterState.from_snapshot(snap))


def reasons(snap: Snapshot, wl: Workload) -> list[str]:
    return [r.message for r in found(snap, wl)]


def codes(snap: Snapshot, wl: Workload) -> list[ReasonCode]:
    return [r.code for r in found(snap, wl)]


def test_no_node_matches_lists_the_filters_with_counts() -> None:
    tainted = Taint(key="maintenance", effect="NoSchedule")
    wl = workload("job", pods(1, 1, node_selector={"nvidia.com/gpu.product": "NVIDIA-B200"}))
    snap = snapshot([node("n1"), node("n2"), node("n3", taints=(tainted,))], [wl])
    assert reasons(snap, wl) == [
        "pod set main: no node matches: 3 fail nodeSelector nvidia.com/gpu.product=NVIDIA-B200"
    ]
    (reason,) = found(snap, wl)
    assert reason.code == ReasonCode.NO_MATCHING_NODE
    assert reason.excluded == {"nodeSelector nvidia.com/gpu.product=NVIDIA-B200": 3}
    wl = workload("job", pods(1, 1))
    snap = snapshot([node("n1", taints=(tainted,)), node("n2", taints=(tainted,))], [wl])
    assert reasons(snap, wl) == ["pod set main: no node matches: 2 fail taint maintenance:NoSchedule"]


def test_pod_larger_than_any_node() -> None:
    wl = workload("job", pods(1, 16))
    snap = snapshot([node("n1"), node("n2", gpus=4)], [wl])
    assert reasons(snap, wl) == [
        "pod set main: a pod needs 16 GPUs; the largest node its filters allow (n1) has 8 GPUs, "
        "so it can never fit"
    ]
    (reason,) = found(snap, wl)
    assert (reason.code, reason.needed, reason.available, reason.permanent) == (
        ReasonCode.POD_TOO_LARGE,
        16,
        8,
        True,
    )


def test_gang_larger_than_any_rack_can_never_fit() -> None:
    wl = workload("job", pods(3, 8, required_topology=RACK))
    snap = snapshot([node("n1", rack="r1"), node("n2", rack="r1"), node("n3", rack="r2")], [wl])
    (reason,) = reasons(snap, wl)
    assert reason == (
        f"pod set main: needs 24 NVIDIA-H100-80GB-HBM3 GPUs (3 pods x 8) in one {RACK}; "
        "the largest such domain has 16 usable GPUs, so it can never fit"
    )
    (value,) = found(snap, wl)
    assert value.code == ReasonCode.TOPOLOGY_UNSATISFIABLE and value.permanent
    assert (value.needed, value.available, value.scope) == (24, 16, RACK)


def test_quota_shortfall_names_queue_need_and_what_is_left() -> None:
    wl = workload("job", pods(1, 8), queue="q")
    queue = gpu_queue("team-a", gpus=16, borrowing_limit=0).model_copy(
        update={"usage": {"default": {"nvidia.com/gpu": 12}}}
    )
    snap = snapshot(
        [node("n1")],
        [wl],
        cluster_queues=[queue],
        local_queues=[LocalQueue(namespace="default", name="q", cluster_queue="team-a")],
        flavors=[ResourceFlavor(name="default")],
    )
    assert reasons(snap, wl) == [
        "ClusterQueue team-a GPU quota (flavor default): needs 8, 4 left "
        "(nominal 16, no cohort to borrow from)"
    ]
    (reason,) = found(snap, wl)
    assert reason.code == ReasonCode.QUOTA_EXHAUSTED
    assert (reason.cluster_queue, reason.flavor, reason.needed, reason.available, reason.nominal) == (
        "team-a",
        "default",
        8,
        4,
        16,
    )


def test_free_capacity_too_small_in_any_rack_and_held_by_running_pods() -> None:
    wl = workload("job", pods(2, 8, required_topology=RACK))
    busy = NodeUsage(gpu_milli=(1000,) * 4 + (0,) * 4)
    snap = snapshot(
        [node("n1", rack="r1"), node("n2", rack="r1"), node("n3", rack="r2")], [wl], usage={"n2": busy}
    )
    state = ClusterState.from_snapshot(snap)
    got = explain_deferral(snap, wl, state, context=PlanContext(state_before=state))
    assert [r.code for r in got] == [ReasonCode.TOPOLOGY_UNSATISFIABLE, ReasonCode.CAPACITY_IN_USE]
    assert [r.message for r in got] == [
        f"pod set main: needs 16 NVIDIA-H100-80GB-HBM3 GPUs (2 pods x 8) in one {RACK}; "
        "the one with the most room has 12 GPUs free",
        "capacity in use by running workloads",
    ]


def test_gpus_spread_over_nodes() -> None:
    wl = workload("job", pods(1, 8))
    half = NodeUsage(gpu_milli=(1000,) * 4 + (0,) * 4)
    snap = snapshot([node("n1"), node("n2")], [wl], usage={"n1": half, "n2": half})
    (reason,) = reasons(snap, wl)
    assert reason == (
        "pod set main: needs 8 NVIDIA-H100-80GB-HBM3 GPUs; only 0 of 1 pods fit (8 GPUs free on eligible "
        "nodes, at most 4 on one node); the free GPUs are scattered over nodes"
    )
    assert codes(snap, wl) == [ReasonCode.GPUS_FRAGMENTED]


def plan_reasons(snap: Snapshot, admitted: dict[str, list[str]], key: str) -> list[str]:
    return [r.message for r in plan_found(snap, admitted, key)]


def plan_found(snap: Snapshot, admitted: dict[str, list[str]], key: str) -> list[Reason]:
    placement = Placement(
        admitted={
            k: WorkloadAssignment(
                pods={
                    "main": [PodPlacement(index=i, node=n, gpus=tuple(range(8))) for i, n in enumerate(nodes)]
                }
            )
            for k, nodes in admitted.items()
        }
    )
    decision = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="x").decision(key)
    assert decision is not None and decision.decision == "defer"
    return decision.reasons


def test_capacity_taken_by_higher_priority_work() -> None:
    snap = snapshot(
        [node("n1")], [workload("low", pods(1, 8), age=100), workload("high", pods(1, 8), priority=5)]
    )
    got = plan_reasons(snap, {"default/high": ["n1"]}, "default/low")
    assert got[-1] == "capacity taken by higher-priority work (default/high)"
    last = plan_found(snap, {"default/high": ["n1"]}, "default/low")[-1]
    assert last.code == ReasonCode.HIGHER_PRIORITY_FIRST and last.workloads == ("default/high",)


def test_lower_in_the_queue_than_admitted_work() -> None:
    snap = snapshot(
        [node("n1")], [workload("first", pods(1, 8), age=100), workload("second", pods(1, 8), age=1)]
    )
    got = plan_reasons(snap, {"default/first": ["n1"]}, "default/second")
    assert got[-1] == "lower in the queue than admitted work that used the remaining capacity (default/first)"
    assert plan_found(snap, {"default/first": ["n1"]}, "default/second")[-1].code == ReasonCode.LOWER_IN_QUEUE


def test_quota_used_by_the_plan_is_attributed() -> None:
    local = [LocalQueue(namespace="default", name="q", cluster_queue="team-a")]
    snap = snapshot(
        [node("n1"), node("n2")],
        [workload("first", pods(1, 8), queue="q", age=100), workload("second", pods(1, 8), queue="q", age=1)],
        cluster_queues=[gpu_queue("team-a", gpus=8)],
        local_queues=local,
        flavors=[ResourceFlavor(name="default")],
    )
    placement = Placement(
        admitted={
            "default/first": WorkloadAssignment(
                pods={"main": [PodPlacement(index=0, node="n1", gpus=tuple(range(8)))]},
                flavors={"main": "default"},
            )
        }
    )
    decision = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="x").decision("default/second")
    assert decision is not None
    assert [r.message for r in decision.reasons] == [
        "ClusterQueue team-a GPU quota (flavor default): needs 8, 0 left (nominal 8, no cohort to borrow "
        "from); used by work admitted in this plan (default/first)"
    ]
    assert decision.reasons[0].workloads == ("default/first",)


def test_fits_but_not_chosen() -> None:
    wl = workload("job", pods(1, 8))
    snap = snapshot([node("n1")], [wl])
    (reason,) = reasons(snap, wl)
    assert reason.startswith("fits the capacity and quota left after this plan")
    assert codes(snap, wl) == [ReasonCode.POLICY_CHOICE]


def test_deferral_that_avoids_stranding_says_so() -> None:
    # Two 8-GPU nodes; a 1x6 job would leave 2 GPUs that no other pending pod can use.
    snap = snapshot(
        [node("n1"), node("n2")],
        [workload("six", pods(1, 6), age=100), workload("eight", pods(2, 8), age=1)],
    )
    got = plan_reasons(snap, {"default/eight": ["n1", "n2"]}, "default/six")
    assert got[-2:] == [
        "capacity used by work admitted in this plan (default/eight), which admits more in total",
        "admitting it would strand GPUs: each 6-GPU pod leaves 2 of a node's 8 free GPUs, and no other "
        "pending pod asks for 2 or fewer",
    ]
    tail = plan_found(snap, {"default/eight": ["n1", "n2"]}, "default/six")[-2:]
    assert [r.code for r in tail] == [ReasonCode.BETTER_OVERALL_PLAN, ReasonCode.WOULD_STRAND_GPUS]


def test_no_quota_reason_when_another_flavor_has_quota() -> None:
    spot = gpu_queue("team-a", gpus=0, flavor="spot").resource_groups[0]
    reserved = gpu_queue("team-a", gpus=8, flavor="reserved").resource_groups[0]
    queue = ClusterQueue(
        name="team-a",
        resource_groups=(spot.model_copy(update={"flavors": spot.flavors + reserved.flavors}),),
    )
    wl = workload("job", pods(1, 8), queue="q")
    snap = snapshot(
        [node("n1")],
        [wl],
        usage={"n1": NodeUsage(gpu_milli=(1000,) * 8)},
        cluster_queues=[queue],
        local_queues=[LocalQueue(namespace="default", name="q", cluster_queue="team-a")],
        flavors=[ResourceFlavor(name="spot"), ResourceFlavor(name="reserved")],
    )
    assert reasons(snap, wl) == [
        "pod set main: needs 8 NVIDIA-H100-80GB-HBM3 GPUs; no GPU is free on the eligible nodes"
    ]


def test_pods_that_fit_only_across_nvlink_islands_name_nvlink_as_the_binding_constraint() -> None:
    pairs = [[0, 1], [2, 3], [4, 5], [6, 7]]
    every_other = NodeUsage(gpu_milli=(1000, 0) * 4, gpu_mem_mib=(40_960, 0) * 4, pods=4)
    wl = workload("strict", pods(1, 2, nvlink_required=True))
    snap = snapshot([node("a1", islands=pairs, gpu_mem=40_960)], [wl], usage={"a1": every_other})
    (reason,) = found(snap, wl)
    assert reason.code == ReasonCode.NVLINK_REQUIRED
    assert reason.message.endswith(
        "; each pod must sit inside one NVLink island, and too few islands have 2 GPUs free"
    )
    loose = workload("loose", pods(1, 2, cpu=200_000))
    assert codes(snapshot([node("a1", islands=pairs, gpu_mem=40_960)], [loose]), loose) != [
        ReasonCode.NVLINK_REQUIRED
    ]
