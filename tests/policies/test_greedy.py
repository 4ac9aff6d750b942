"""The greedy baselines: queue order, whole gangs, topology domains, products, quota, islands."""

import pytest

from optsched.errors import InputError
from optsched.model.names import PRODUCT_LABEL
from optsched.model.placement import Placement
from optsched.model.plan import PlanStatus
from optsched.model.snapshot import (
    ClusterQueue,
    FlavorQuota,
    GpuMode,
    LocalQueue,
    NodeUsage,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Workload,
)
from optsched.planning.build import build_plan
from optsched.policies.choosers import BestFit, FirstFit
from optsched.policies.greedy import greedy_placement, tas_placement
from optsched.validate import check_plan
from tests.builders import A100, H100, RACK, gpu_queue, node, pods, snapshot, workload


def nodes_of(placement: Placement, key: str) -> list[str]:
    return [p.node for pods_ in placement.admitted[key].pods.values() for p in pods_]


def assert_valid(snap: Snapshot, placement: Placement) -> None:
    plan = build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="test")
    assert check_plan(snap, plan) == []


def test_gang_that_cannot_fit_whole_leaves_no_pods_behind() -> None:
    # Three 8-GPU pods cannot fit on two nodes; the next gang must still find both nodes empty.
    snap = snapshot(
        [node("n1"), node("n2")],
        [workload("big", pods(3, 8), age=10), workload("pair", pods(2, 8), age=5)],
    )
    placement = greedy_placement(snap, FirstFit())
    assert "default/big" not in placement.admitted
    assert sorted(nodes_of(placement, "default/pair")) == ["n1", "n2"]
    assert_valid(snap, placement)


def test_queue_order_is_priority_then_age() -> None:
    snap = snapshot(
        [node("n1")],
        [workload("old", pods(1, 8), age=100), workload("urgent", pods(1, 8), priority=5, age=1)],
    )
    placement = greedy_placement(snap, FirstFit())
    assert list(placement.admitted) == ["default/urgent"]


def test_required_rack_keeps_the_gang_in_one_rack() -> None:
    # FirstFit alone would take n1 (rack r1) and n2 (rack r2).
    snap = snapshot(
        [node("n1", rack="r1"), node("n2", rack="r2"), node("n3", rack="r2")],
        [workload("job", pods(2, 8, required_topology=RACK))],
    )
    placement = greedy_placement(snap, FirstFit())
    assert sorted(nodes_of(placement, "default/job")) == ["n2", "n3"]
    assert_valid(snap, placement)


def test_required_rack_picks_the_tightest_rack_that_holds_the_gang() -> None:
    snap = snapshot(
        [
            node("a1", rack="r1"),
            node("a2", rack="r1"),
            node("a3", rack="r1"),
            node("b1", rack="r2"),
            node("b2", rack="r2"),
        ],
        [workload("job", pods(2, 8, required_topology=RACK))],
    )
    placement = greedy_placement(snap, FirstFit())
    assert sorted(nodes_of(placement, "default/job")) == ["b1", "b2"]


def test_required_rack_defers_when_no_rack_can_hold_the_gang() -> None:
    snap = snapshot(
        [node("n1", rack="r1"), node("n2", rack="r2")],
        [workload("job", pods(2, 8, required_topology=RACK))],
    )
    assert greedy_placement(snap, FirstFit()).admitted == {}


def test_preferred_rack_is_used_when_possible_and_relaxed_otherwise() -> None:
    nodes = [node("n1", rack="r1"), node("n2", rack="r2"), node("n3", rack="r2")]
    fits = snapshot(nodes, [workload("job", pods(2, 8, preferred_topology=RACK))])
    assert sorted(nodes_of(greedy_placement(fits, FirstFit()), "default/job")) == ["n2", "n3"]
    spans = snapshot(nodes, [workload("job", pods(3, 8, preferred_topology=RACK))])
    assert sorted(nodes_of(greedy_placement(spans, FirstFit()), "default/job")) == ["n1", "n2", "n3"]
    ignored = greedy_placement(fits, FirstFit(), topology_aware=False)
    assert sorted(nodes_of(ignored, "default/job")) == ["n1", "n2"]


def test_one_gpu_product_per_gang_unless_mixing_is_allowed() -> None:
    nodes = [node("h1"), node("a1", product=A100)]
    strict = snapshot(nodes, [workload("job", pods(2, 8))])
    assert greedy_placement(strict, FirstFit()).admitted == {}
    mixed_set = pods(2, 8).model_copy(update={"allow_mixed_products": True})
    mixed = snapshot(nodes, [workload("job", mixed_set)])
    placement = greedy_placement(mixed, FirstFit())
    assert sorted(nodes_of(placement, "default/job")) == ["a1", "h1"]
    assert_valid(mixed, placement)


def test_product_group_where_the_gang_fits_is_chosen() -> None:
    # The H100 node comes first, but only the two A100 nodes can hold the whole gang.
    nodes = [node("h1"), node("a1", product=A100), node("a2", product=A100)]
    snap = snapshot(nodes, [workload("job", pods(2, 8))])
    assert sorted(nodes_of(greedy_placement(snap, FirstFit()), "default/job")) == ["a1", "a2"]


def quota_snapshot(*workloads_: Workload, queues: list[ClusterQueue] | None = None) -> Snapshot:
    return snapshot(
        [node("n1"), node("n2"), node("n3")],
        list(workloads_),
        cluster_queues=queues or [gpu_queue("team-a", gpus=8)],
        local_queues=[
            LocalQueue(namespace="default", name="a", cluster_queue="team-a"),
            LocalQueue(namespace="default", name="b", cluster_queue="team-b"),
        ],
        flavors=[ResourceFlavor(name="default")],
    )


def test_quota_is_consumed_as_workloads_are_admitted() -> None:
    snap = quota_snapshot(
        workload("first", pods(1, 8), queue="a", age=10), workload("second", pods(1, 8), queue="a", age=5)
    )
    placement = greedy_placement(snap, FirstFit())
    assert list(placement.admitted) == ["default/first"]
    assert placement.admitted["default/first"].flavors == {"main": "default"}


def test_cohort_borrowing_respects_the_borrowing_limit() -> None:
    wl = [workload("first", pods(1, 8), queue="a", age=10), workload("second", pods(1, 8), queue="a", age=5)]
    lender = gpu_queue("team-b", gpus=8, cohort="pool")
    generous = quota_snapshot(*wl, queues=[gpu_queue("team-a", gpus=8, cohort="pool"), lender])
    assert len(greedy_placement(generous, FirstFit()).admitted) == 2
    capped = quota_snapshot(
        *wl, queues=[gpu_queue("team-a", gpus=8, cohort="pool", borrowing_limit=0), lender]
    )
    assert list(greedy_placement(capped, FirstFit()).admitted) == ["default/first"]


def test_borrowing_stops_at_the_cohort_unused_quota() -> None:
    used = gpu_queue("team-b", gpus=8, cohort="pool").model_copy(
        update={"usage": {"default": {"nvidia.com/gpu": 4}}}
    )
    snap = quota_snapshot(
        workload("a8", pods(1, 8), queue="a", age=10),
        workload("a8b", pods(1, 8), queue="a", age=5),
        queues=[gpu_queue("team-a", gpus=8, cohort="pool"), used],
    )
    # team-a uses its own 8, then may borrow only the 4 team-b does not use: the second 8 waits.
    assert list(greedy_placement(snap, FirstFit()).admitted) == ["default/a8"]


def test_min_count_admits_as_many_pods_as_fit() -> None:
    snap = snapshot([node("n1"), node("n2"), node("n3")], [workload("elastic", pods(4, 8, min_count=2))])
    placement = greedy_placement(snap, FirstFit())
    assert len(nodes_of(placement, "default/elastic")) == 3
    assert_valid(snap, placement)
    too_few = snapshot([node("n1")], [workload("elastic", pods(4, 8, min_count=2))])
    assert greedy_placement(too_few, FirstFit()).admitted == {}


def test_island_aware_picks_a_whole_island_and_lowest_index_does_not() -> None:
    # On a DRA node the plan's indices are what the pod gets, so the walk's choice is the plan's.
    pairs = [[0, 1], [2, 3]]
    usage = {"n1": NodeUsage(gpu_milli=(1000, 0, 0, 0))}
    dra = node("n1", gpus=4, islands=pairs).model_copy(update={"gpu_mode": GpuMode.DRA})
    snap = snapshot([dra], [workload("job", pods(1, 2))], usage=usage)
    aware = greedy_placement(snap, FirstFit())
    assert aware.admitted["default/job"].pods["main"][0].gpus == (2, 3)
    naive = greedy_placement(snap, FirstFit(), island_aware=False)
    assert naive.admitted["default/job"].pods["main"][0].gpus == (1, 2)
    # On a device-plugin node the device plugin chooses, whatever the walk took: the plan says its pick.
    plugin = snapshot([node("n1", gpus=4, islands=pairs)], [workload("job", pods(1, 2))], usage=usage)
    naive = greedy_placement(plugin, FirstFit(), island_aware=False)
    assert naive.admitted["default/job"].pods["main"][0].gpus == (2, 3)


def test_nvlink_required_skips_nodes_without_a_free_island() -> None:
    pairs = [[0, 1], [2, 3]]
    usage = {"n1": NodeUsage(gpu_milli=(1000, 0, 1000, 0))}
    snap = snapshot(
        [node("n1", gpus=4, islands=pairs), node("n2", gpus=4, islands=pairs)],
        [workload("job", pods(1, 2, nvlink_required=True))],
        usage=usage,
    )
    placement = greedy_placement(snap, FirstFit(), island_aware=False)
    pod = placement.admitted["default/job"].pods["main"][0]
    assert pod.node == "n2"
    assert pod.gpus == (0, 1)


def test_unknown_gpu_indices_are_never_promised() -> None:
    usage = {"n1": NodeUsage(unknown_index_gpus=2)}
    snap = snapshot([node("n1")], [workload("job", pods(1, 4)), workload("too-big", pods(1, 8))], usage=usage)
    placement = greedy_placement(snap, FirstFit())
    assert placement.admitted["default/job"].pods["main"][0].gpus is None
    assert "default/too-big" not in placement.admitted
    assert_valid(snap, placement)


def test_bestfit_packs_the_partly_used_node() -> None:
    usage = {"n2": NodeUsage(gpu_milli=(1000,) * 4 + (0,) * 4)}
    snap = snapshot([node("n1"), node("n2")], [workload("job", pods(1, 4))], usage=usage)
    assert nodes_of(greedy_placement(snap, BestFit()), "default/job") == ["n2"]


def test_tas_keeps_a_four_pod_gang_in_the_tightest_rack() -> None:
    # No node holds four 3-GPU pods; rack r1 (12 free) and r2 (16 free) both can: BestFit takes r1.
    half = NodeUsage(gpu_milli=(1000, 1000) + (0,) * 6)
    snap = snapshot(
        [node("a1", rack="r1"), node("a2", rack="r1"), node("b1", rack="r2"), node("b2", rack="r2")],
        [workload("job", pods(4, 3, required_topology=RACK))],
        usage={"a1": half, "a2": half},
    )
    placement = tas_placement(snap)
    assert sorted(set(nodes_of(placement, "default/job"))) == ["a1", "a2"]
    assert_valid(snap, placement)


def test_tas_puts_a_small_gang_on_one_node_with_lowest_indices() -> None:
    snap = snapshot(
        [node("n1", rack="r1"), node("n2", rack="r2")],
        [workload("job", pods(2, 2, preferred_topology=RACK))],
        usage={"n2": NodeUsage(gpu_milli=(1000,) + (0,) * 7)},
    )
    placement = tas_placement(snap)
    pods_ = placement.admitted["default/job"].pods["main"]
    assert {p.node for p in pods_} == {"n2"}
    assert sorted(p.gpus for p in pods_ if p.gpus) == [(1, 2), (3, 4)]


def test_given_order_and_unknown_order() -> None:
    snap = snapshot(
        [node("n1")],
        [workload("first-listed", pods(1, 8), age=1), workload("urgent", pods(1, 8), priority=5)],
    )
    assert list(greedy_placement(snap, FirstFit(), order="given").admitted) == ["default/first-listed"]
    with pytest.raises(InputError, match="unknown order 'fifo'; expected one of queue, given"):
        greedy_placement(snap, FirstFit(), order="fifo")


def test_second_flavor_is_used_when_the_first_has_no_quota_left() -> None:
    queue = ClusterQueue(
        name="team-a",
        resource_groups=(
            ResourceGroup(
                covered_resources=("nvidia.com/gpu",),
                flavors=(
                    FlavorQuota(name="h100", resources=(ResourceQuota(name="nvidia.com/gpu", nominal=0),)),
                    FlavorQuota(name="a100", resources=(ResourceQuota(name="nvidia.com/gpu", nominal=8),)),
                ),
            ),
        ),
    )
    snap = snapshot(
        [node("h1"), node("a1", product=A100)],
        [workload("job", pods(1, 8), queue="a")],
        cluster_queues=[queue],
        local_queues=[LocalQueue(namespace="default", name="a", cluster_queue="team-a")],
        flavors=[
            ResourceFlavor(name="h100", node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
            ResourceFlavor(name="a100", node_labels={"nvidia.com/gpu.product": A100}),
        ],
    )
    placement = greedy_placement(snap, FirstFit())
    assert placement.admitted["default/job"].flavors == {"main": "a100"}
    assert nodes_of(placement, "default/job") == ["a1"]
    assert_valid(snap, placement)


def test_a_node_under_two_flavors_keeps_its_first_place_in_the_first_pods_pool() -> None:
    """The first pod's pool offers each node where it first appears among the flavors' nodes."""
    h100 = gpu_queue("q", gpus=8, flavor="h100").resource_groups[0].flavors[0]
    anywhere = gpu_queue("q", gpus=8, flavor="any").resource_groups[0].flavors[0]
    group = gpu_queue("q", gpus=0).resource_groups[0].model_copy(update={"flavors": (h100, anywhere)})
    snap = snapshot(
        [node("a1", product=A100, gpu_mem=40_960), node("h1", product=H100)],
        [workload("w", pods(2, 1), queue="lq")],
        cluster_queues=[ClusterQueue(name="q", resource_groups=(group,))],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="q")],
        flavors=[ResourceFlavor(name="h100", node_labels={PRODUCT_LABEL: H100}), ResourceFlavor(name="any")],
    )
    placement = greedy_placement(snap, FirstFit())
    assignment = placement.admitted["default/w"]
    assert assignment.flavors == {"main": "h100"}
    assert {pod.node for pod in assignment.pods["main"]} == {"h1"}
