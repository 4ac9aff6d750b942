"""check_plan: a valid hand-made plan passes; each way of breaking it is named precisely."""

from collections.abc import Sequence

import pytest

from optsched.errors import PlanValidationError
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import (
    ClusterQueue,
    HeldWorkload,
    LocalQueue,
    Node,
    NodeSelectorTerm,
    NodeUsage,
    QuotaReservation,
    ResourceFlavor,
    SelectorRequirement,
    Snapshot,
    Taint,
    Workload,
)
from optsched.validate import assert_valid, check_plan
from tests.builders import A100, RACK, gpu_queue, node, pods, snapshot, workload

Pods = Sequence[tuple[str, list[int] | None]]


def decide(
    name: str, pods_: Pods | None = None, *, pod_set: str = "main", flavor: str | None = None
) -> WorkloadDecision:
    if pods_ is None:
        return WorkloadDecision(name=f"default/{name}", decision="defer")
    placed = [PodPlacement(index=i, node=n, gpus=g) for i, (n, g) in enumerate(pods_)]
    return WorkloadDecision(
        name=f"default/{name}",
        decision="admit",
        pod_sets=[PodSetPlacement(name=pod_set, flavor=flavor, pods=placed)],
    )


def plan(*decisions: WorkloadDecision) -> Plan:
    return Plan(status=PlanStatus.HEURISTIC, policy="test", workloads=list(decisions))


def one(snap: Snapshot, *decisions: WorkloadDecision) -> str:
    """The single violation of a plan that breaks one rule."""
    violations = check_plan(snap, plan(*decisions))
    assert len(violations) == 1, violations
    return violations[0]


BASE = snapshot([node("n1"), node("n2")], [workload("job", pods(2, 4))])
VALID = decide("job", [("n1", [0, 1, 2, 3]), ("n1", [4, 5, 6, 7])])


def test_a_valid_plan_has_no_violations() -> None:
    assert check_plan(BASE, plan(VALID)) == []
    assert check_plan(BASE, plan(decide("job"))) == []
    assert_valid(BASE, plan(VALID))


def test_assert_valid_raises_with_every_violation() -> None:
    bad = decide("job", [("n1", [0, 1, 2, 3]), ("n1", [0, 1, 2, 3])])
    with pytest.raises(PlanValidationError) as caught:
        assert_valid(BASE, plan(bad))
    assert caught.value.violations == check_plan(BASE, plan(bad))
    assert len(caught.value.violations) == 4


def test_unknown_duplicate_and_missing_workloads() -> None:
    assert "default/ghost: admitted but not a pending workload" in one(
        BASE, VALID, decide("ghost", [("n2", [0])])
    )
    assert "default/job: appears more than once" in one(BASE, VALID, decide("job"))
    assert "default/job: pending but missing from the plan" in one(BASE)


def test_deferred_workload_with_pods() -> None:
    deferred = VALID.model_copy(update={"decision": "defer"})
    assert "default/job: deferred but has pods placed" in one(BASE, deferred)


def test_gang_must_be_whole() -> None:
    message = one(BASE, decide("job", [("n1", [0, 1, 2, 3])]))
    assert "workload default/job pod set main: 1 pods placed, gang needs 2 to 2" in message


def test_pod_indices_must_be_0_to_n_minus_1() -> None:
    broken = decide("job", [("n1", [0, 1, 2, 3]), ("n1", [4, 5, 6, 7])])
    pods_ = broken.pod_sets[0].pods
    pods_[1] = pods_[1].model_copy(update={"index": 2})
    assert "pod indices [0, 2] are not 0..1" in one(BASE, broken)


def test_pod_set_must_exist() -> None:
    extra = VALID.model_copy(update={"pod_sets": [*VALID.pod_sets, PodSetPlacement(name="ghost", pods=[])]})
    assert "plan names pod set ghost" in one(BASE, extra)


def test_unknown_node() -> None:
    assert "pod main/1 on node n9: no such node" in one(
        BASE, decide("job", [("n1", [0, 1, 2, 3]), ("n9", [0, 1, 2, 3])])
    )


def test_node_not_ready_or_cordoned() -> None:
    down = snapshot([node("n1").model_copy(update={"ready": False})], [workload("job", pods(1, 1))])
    assert "on node n1: node is not Ready" in one(down, decide("job", [("n1", [0])]))
    cordoned = snapshot(
        [node("n1").model_copy(update={"unschedulable": True})], [workload("job", pods(1, 1))]
    )
    assert "on node n1: node is cordoned" in one(cordoned, decide("job", [("n1", [0])]))


def test_node_selector_and_affinity() -> None:
    snap = snapshot([node("n1")], [workload("job", pods(1, 1, node_selector={"pool": "train"}))])
    assert "pod main/0 on node n1: nodeSelector pool=train not satisfied" in one(
        snap, decide("job", [("n1", [0])])
    )
    term = NodeSelectorTerm(
        match_expressions=(SelectorRequirement(key="zone", operator="In", values=("a",)),)
    )
    affine = pods(1, 1).model_copy(update={"affinity_terms": (term,)})
    snap = snapshot([node("n1")], [workload("job", affine)])
    assert "required node affinity not satisfied" in one(snap, decide("job", [("n1", [0])]))


def test_untolerated_taint() -> None:
    tainted = node("n1", taints=(Taint(key="gpu", value="h100", effect="NoSchedule"),))
    snap = snapshot([tainted], [workload("job", pods(1, 1))])
    assert "node taint gpu=h100:NoSchedule not tolerated" in one(snap, decide("job", [("n1", [0])]))


def quota_snapshot(
    nodes: list[Node],
    workloads: list[Workload],
    queues: list[ClusterQueue],
    flavors: list[ResourceFlavor] | None = None,
) -> Snapshot:
    return snapshot(
        nodes,
        workloads,
        cluster_queues=queues,
        local_queues=[
            LocalQueue(namespace="default", name="a", cluster_queue="team-a"),
            LocalQueue(namespace="default", name="b", cluster_queue="team-b"),
        ],
        flavors=flavors or [ResourceFlavor(name="default")],
    )


def test_flavor_node_labels_and_allowed_flavors() -> None:
    labelled = ResourceFlavor(name="default", node_labels={"pool": "h100"})
    snap = quota_snapshot(
        [node("n1")], [workload("job", pods(1, 1), queue="a")], [gpu_queue("team-a", gpus=8)], [labelled]
    )
    assert "flavor default needs node label pool=h100" in one(
        snap, decide("job", [("n1", [0])], flavor="default")
    )
    plain = quota_snapshot(
        [node("n1")], [workload("job", pods(1, 1), queue="a")], [gpu_queue("team-a", gpus=8)]
    )
    assert "flavor spot is not allowed here; allowed: default" in one(
        plain, decide("job", [("n1", [0])], flavor="spot")
    )
    assert "no ResourceFlavor chosen" in one(plain, decide("job", [("n1", [0])]))


def test_flavor_taint_must_be_tolerated() -> None:
    tainted = ResourceFlavor(name="default", node_taints=(Taint(key="spot", effect="NoSchedule"),))
    snap = quota_snapshot(
        [node("n1")], [workload("job", pods(1, 1), queue="a")], [gpu_queue("team-a", gpus=8)], [tainted]
    )
    assert "flavor default taint spot:NoSchedule not tolerated" in one(
        snap, decide("job", [("n1", [0])], flavor="default")
    )


def test_gpu_indices_must_exist_be_healthy_and_match_the_request() -> None:
    snap = snapshot([node("n1", gpus=4, unhealthy=frozenset({3}))], [workload("job", pods(1, 2))])
    assert "GPU 4 does not exist (node has 4)" in one(snap, decide("job", [("n1", [0, 4])]))
    assert "GPU 3 is unhealthy" in one(snap, decide("job", [("n1", [0, 3])]))
    assert "given 1 GPUs [0], pod asks for 2" in one(snap, decide("job", [("n1", [0])]))
    assert "GPU index repeated in [1, 1]" in one(snap, decide("job", [("n1", [1, 1])]))


def test_gpu_used_twice_in_the_plan_or_already_in_use() -> None:
    snap = snapshot(
        [node("n1")],
        [workload("a", pods(1, 2)), workload("b", pods(1, 2))],
        usage={"n1": NodeUsage(gpu_milli=(1000,) + (0,) * 7)},
    )
    twice = one(snap, decide("a", [("n1", [1, 2])]), decide("b", [("n1", [2, 3])]))
    assert "workload default/b pod main/0 on node n1: GPU 2 is also given whole to main/0" in twice
    assert "GPU 0 is already in use by a running pod" in one(snap, decide("a", [("n1", [0, 1])]), decide("b"))


def test_gpu_shares_must_fit_compute_and_memory() -> None:
    share = pods(1, 1, gpu_milli=600, gpu_mem=40_000)
    snap = snapshot([node("n1", gpus=1, gpu_mem=81_920)], [workload("a", share), workload("b", share)])
    assert "GPU 0 compute over-committed (1200/1000 milli)" in one(
        snap, decide("a", [("n1", [0])]), decide("b", [("n1", [0])])
    )
    roomy = pods(1, 1, gpu_milli=300, gpu_mem=50_000)
    snap = snapshot([node("n1", gpus=1, gpu_mem=81_920)], [workload("a", roomy), workload("b", roomy)])
    assert "GPU 0 memory over-committed (100000/81920 MiB)" in one(
        snap, decide("a", [("n1", [0])]), decide("b", [("n1", [0])])
    )


def test_a_pod_of_several_shares_needs_different_gpus_with_room_on_each() -> None:
    shares = pods(1, 2, gpu_milli=500, gpu_mem=30_000)
    snap = snapshot([node("n1", gpus=2, gpu_mem=81_920)], [workload("a", shares), workload("b", shares)])
    assert check_plan(snap, plan(decide("a", [("n1", [0, 1])]), decide("b", [("n1", [0, 1])]))) == []
    assert "GPU index repeated in [0, 0]" in one(snap, decide("a", [("n1", [0, 0])]), decide("b"))
    heavy = pods(1, 2, gpu_milli=500, gpu_mem=50_000)
    snap = snapshot([node("n1", gpus=2, gpu_mem=81_920)], [workload("a", heavy), workload("b", heavy)])
    violations = check_plan(snap, plan(decide("a", [("n1", [0, 1])]), decide("b", [("n1", [1, 0])])))
    assert [v.split(": ", 1)[1] for v in violations] == [
        "GPU 0 memory over-committed (100000/81920 MiB)",
        "GPU 1 memory over-committed (100000/81920 MiB)",
    ]


def test_no_gpu_runs_more_tasks_than_its_split_count() -> None:
    hami = node("n1", gpus=1).model_copy(update={"hami": True, "gpu_split": 2})
    tiny = pods(1, 1, gpu_milli=100, gpu_mem=100)
    snap = snapshot(
        [hami],
        [workload("a", tiny), workload("b", tiny)],
        usage={"n1": NodeUsage(gpu_milli=(100,), gpu_mem_mib=(100,), gpu_tasks=(1,))},
    )
    assert check_plan(snap, plan(decide("a", [("n1", [0])]), decide("b"))) == []
    assert "GPU 0 runs 3 tasks, its split count is 2" in one(
        snap, decide("a", [("n1", [0])]), decide("b", [("n1", [0])])
    )


def test_share_on_a_gpu_given_whole_to_another_pod() -> None:
    snap = snapshot(
        [node("n1", gpus=2)], [workload("a", pods(1, 2)), workload("b", pods(1, 1, gpu_milli=500))]
    )
    message = one(snap, decide("a", [("n1", [0, 1])]), decide("b", [("n1", [1])]))
    assert "workload default/b pod main/0 on node n1: GPU 1 is also given whole" in message


def test_unknown_index_usage_forbids_promising_indices_and_caps_the_count() -> None:
    some = snapshot(
        [node("n1")], [workload("job", pods(1, 4))], usage={"n1": NodeUsage(unknown_index_gpus=2)}
    )
    assert "promises GPU indices [0, 1, 2, 3], but 2 in-use GPUs" in one(
        some, decide("job", [("n1", [0, 1, 2, 3])])
    )
    assert check_plan(some, plan(decide("job", [("n1", None)]))) == []
    snap = snapshot(
        [node("n1")], [workload("job", pods(1, 4))], usage={"n1": NodeUsage(unknown_index_gpus=6)}
    )
    assert "node n1: GPUs over-committed: 10 busy after the plan" in one(snap, decide("job", [("n1", None)]))


def test_missing_indices_on_a_node_whose_indices_are_known() -> None:
    assert "no GPU indices given" in one(BASE, decide("job", [("n1", None), ("n1", [4, 5, 6, 7])]))


def test_cpu_memory_pods_and_extended_resources_are_not_over_committed() -> None:
    snap = snapshot([node("n1", cpu=4000)], [workload("job", pods(2, 0, cpu=3000))])
    assert "node n1: CPU over-committed (6000m of 4000m)" in one(
        snap, decide("job", [("n1", []), ("n1", [])])
    )
    snap = snapshot([node("n1", mem=8192)], [workload("job", pods(2, 0, mem=6000))])
    assert "node n1: memory over-committed (12000 MiB of 8192 MiB)" in one(
        snap, decide("job", [("n1", []), ("n1", [])])
    )
    mig = "nvidia.com/mig-1g.10gb"
    snap = snapshot([node("n1", extended={mig: 1})], [workload("job", pods(2, 0, extended={mig: 1}))])
    assert f"node n1: {mig} over-committed (plan takes 2, 1 free)" in one(
        snap, decide("job", [("n1", []), ("n1", [])])
    )
    full = snapshot([node("n1").model_copy(update={"max_pods": 1})], [workload("job", pods(2, 0))])
    assert "node n1: pod slots over-committed (2 of 1)" in one(full, decide("job", [("n1", []), ("n1", [])]))


def test_gang_on_one_gpu_product() -> None:
    snap = snapshot([node("h1"), node("a1", product=A100)], [workload("job", pods(2, 8))])
    message = one(snap, decide("job", [("h1", list(range(8))), ("a1", list(range(8)))]))
    assert "workload default/job: gang mixes GPU products" in message
    mixed = pods(2, 8).model_copy(update={"allow_mixed_products": True})
    snap = snapshot([node("h1"), node("a1", product=A100)], [workload("job", mixed)])
    assert check_plan(snap, plan(decide("job", [("h1", list(range(8))), ("a1", list(range(8)))]))) == []


def test_required_topology_keeps_pods_in_one_domain() -> None:
    snap = snapshot(
        [node("n1", rack="r1"), node("n2", rack="r2")], [workload("job", pods(2, 8, required_topology=RACK))]
    )
    message = one(snap, decide("job", [("n1", list(range(8))), ("n2", list(range(8)))]))
    assert f"workload default/job pod set main: pods span 2 {RACK} domains" in message


def test_nvlink_required_pods_stay_inside_one_island() -> None:
    snap = snapshot(
        [node("n1", gpus=4, islands=[[0, 1], [2, 3]])], [workload("job", pods(1, 2, nvlink_required=True))]
    )
    assert check_plan(snap, plan(decide("job", [("n1", [2, 3])]))) == []
    assert "GPUs [1, 2] are not inside one NVLink island" in one(snap, decide("job", [("n1", [1, 2])]))


def test_quota_nominal_without_cohort() -> None:
    snap = quota_snapshot(
        [node("n1")],
        [workload("a", pods(1, 4), queue="a"), workload("b", pods(1, 4), queue="a")],
        [gpu_queue("team-a", gpus=6)],
    )
    message = one(
        snap,
        decide("a", [("n1", [0, 1, 2, 3])], flavor="default"),
        decide("b", [("n1", [4, 5, 6, 7])], flavor="default"),
    )
    assert (
        "ClusterQueue team-a flavor default nvidia.com/gpu: plan admits 8 more, usage 8 exceeds nominal 6"
        in message
    )


def test_quota_borrowing_limit_and_cohort_capacity() -> None:
    wl = [workload("a", pods(1, 8), queue="a"), workload("b", pods(1, 8), queue="a")]
    admit_both = (
        decide("a", [("n1", list(range(8)))], flavor="default"),
        decide("b", [("n2", list(range(8)))], flavor="default"),
    )
    lender = gpu_queue("team-b", gpus=8, cohort="pool")
    ok = quota_snapshot([node("n1"), node("n2")], wl, [gpu_queue("team-a", gpus=8, cohort="pool"), lender])
    assert check_plan(ok, plan(*admit_both)) == []
    capped = quota_snapshot(
        [node("n1"), node("n2")], wl, [gpu_queue("team-a", gpus=8, cohort="pool", borrowing_limit=4), lender]
    )
    assert "exceeds nominal 8 + borrowing limit 4" in one(capped, *admit_both)
    busy = lender.model_copy(update={"usage": {"default": {"nvidia.com/gpu": 4}}})
    short = quota_snapshot([node("n1"), node("n2")], wl, [gpu_queue("team-a", gpus=8, cohort="pool"), busy])
    assert "cohort pool flavor default nvidia.com/gpu: members borrow 4 more" in one(short, *admit_both)


def test_workloads_with_a_reservation_do_not_count_again() -> None:
    reserved = workload("a", pods(1, 8), queue="a").model_copy(
        update={
            "reservation": QuotaReservation(
                cluster_queue="team-a", flavors={"main": {"nvidia.com/gpu": "default"}}
            )
        }
    )
    snap = quota_snapshot([node("n1")], [reserved], [gpu_queue("team-a", gpus=0)])
    assert check_plan(snap, plan(decide("a", [("n1", list(range(8)))], flavor="default"))) == []


def _held_snapshot() -> Snapshot:
    reason = Reason(code=ReasonCode.QUEUE_NOT_FOUND, message="LocalQueue nope doesn't exist")
    return BASE.model_copy(
        update={"held": (HeldWorkload(workload=workload("stray", pods(1, 1)), reason=reason),)}
    )


def test_a_held_workload_must_be_in_the_plan_and_deferred() -> None:
    snap = _held_snapshot()
    assert check_plan(snap, plan(VALID, decide("stray"))) == []
    assert one(snap, VALID) == "workload default/stray: pending but missing from the plan"
    admitted = decide("stray", [("n2", [0])])
    assert one(snap, VALID, admitted) == (
        "workload default/stray: admitted, but Kueue cannot admit it: LocalQueue nope doesn't exist"
    )
