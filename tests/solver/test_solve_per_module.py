"""The whole solve, one small feasible and one infeasible case per model module.

The modules one at a time, without the solve, are tested in ``tests/solver/modules``.
"""

from __future__ import annotations

from optsched.model.names import PRODUCT_LABEL
from optsched.model.snapshot import (
    FULL_GPU_MILLI,
    ClusterQueue,
    FlavorQuota,
    LocalQueue,
    Node,
    NodeUsage,
    QuotaReservation,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Workload,
)
from tests.builders import A100, H100, RACK, T4, gpu_queue, node, pods, snapshot, workload
from tests.solver.helpers import admitted, gpus_of, nodes_of, plan_for

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


def used_gpus(*indices: int, count: int = 8, mem: int = 40_960) -> NodeUsage:
    """Whole GPUs taken at known indices."""
    return NodeUsage(
        gpu_milli=tuple(FULL_GPU_MILLI if i in indices else 0 for i in range(count)),
        gpu_mem_mib=tuple(mem if i in indices else 0 for i in range(count)),
        pods=len(indices),
    )


# -- capacity -------------------------------------------------------------------------------------


def test_pod_larger_than_any_node_is_deferred() -> None:
    snap = snapshot([node("n1"), node("n2")], [workload("big", pods(1, 9)), workload("fits", pods(1, 8))])
    plan = plan_for(snap)
    assert admitted(plan) == {"fits"}


def test_shares_on_one_gpu_respect_compute_and_memory() -> None:
    # One GPU of 81,920 MiB: 300-milli shares would fit three times by compute, but at
    # 30,000 MiB each only twice by memory.
    snap = snapshot(
        [node("n1", gpus=1)],
        [workload(f"s{i}", pods(1, 1, gpu_milli=300, gpu_mem=30_000)) for i in range(4)],
    )
    plan = plan_for(snap)
    assert len(admitted(plan)) == 2
    assert all(gpus_of(plan, name) == [(0,)] for name in admitted(plan))


def test_shares_never_exceed_one_gpu_of_compute() -> None:
    snap = snapshot([node("n1", gpus=1)], [workload(f"s{i}", pods(1, 1, gpu_milli=400)) for i in range(3)])
    plan = plan_for(snap)
    assert len(admitted(plan)) == 2


def test_a_share_on_an_untouched_gpu_takes_that_gpu_from_whole_gpu_pods() -> None:
    snap = snapshot(
        [node("n1", gpus=2)],
        [workload("share", pods(1, 1, gpu_milli=500)), workload("pair", pods(1, 2))],
    )
    plan = plan_for(snap)
    assert admitted(plan) == {"pair"}


def test_whole_gpus_on_a_node_with_unknown_indices_get_no_indices() -> None:
    usage = {"n1": NodeUsage(unknown_index_gpus=6, pods=1)}
    snap = snapshot([node("n1")], [workload("two", pods(1, 2)), workload("three", pods(1, 3))], usage=usage)
    plan = plan_for(snap)
    assert admitted(plan) == {"two"}
    assert gpus_of(plan, "two") == [None]


# -- gang -----------------------------------------------------------------------------------------


def test_gang_that_only_partly_fits_is_fully_deferred() -> None:
    snap = snapshot([node("n1"), node("n2")], [workload("gang", pods(3, 8))])
    plan = plan_for(snap)
    assert admitted(plan) == set()
    decision = plan.decision("default/gang")
    assert decision is not None and decision.pod_sets == []


def test_min_count_admits_the_minimum_that_fits() -> None:
    snap = snapshot([node("n1"), node("n2")], [workload("elastic", pods(3, 8, min_count=2))])
    plan = plan_for(snap)
    assert admitted(plan) == {"elastic"}
    assert sorted(nodes_of(plan, "elastic")) == ["n1", "n2"]


# -- one GPU product per gang ---------------------------------------------------------------------


def test_gang_is_not_split_across_gpu_products() -> None:
    snap = snapshot([node("h1"), node("a1", product=A100, islands=PAIRS)], [workload("gang", pods(2, 8))])
    assert admitted(plan_for(snap)) == set()


def test_gang_may_mix_products_when_allowed() -> None:
    mixed = pods(2, 8).model_copy(update={"allow_mixed_products": True})
    snap = snapshot([node("h1"), node("a1", product=A100, islands=PAIRS)], [workload("gang", mixed)])
    plan = plan_for(snap)
    assert sorted(nodes_of(plan, "gang")) == ["a1", "h1"]


# -- quota ----------------------------------------------------------------------------------------


def _quota_snapshot(borrowing_limit: int | None, cohort: str | None) -> Snapshot:
    queues = [gpu_queue("team-a", gpus=8, cohort=cohort, borrowing_limit=borrowing_limit)]
    if cohort is not None:
        queues.append(gpu_queue("team-b", gpus=8, cohort=cohort))
    return snapshot(
        [node("n1"), node("n2")],
        [workload("wide", pods(2, 8), queue="lq")],
        cluster_queues=queues,
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="team-a")],
        flavors=[ResourceFlavor(name="default")],
    )


def test_workload_beyond_nominal_without_cohort_is_deferred() -> None:
    snap = _quota_snapshot(borrowing_limit=None, cohort=None)
    assert admitted(plan_for(snap)) == set()


def test_workload_beyond_borrowing_limit_is_deferred() -> None:
    snap = _quota_snapshot(borrowing_limit=4, cohort="pool")
    assert admitted(plan_for(snap)) == set()


def test_borrowing_within_the_cohort_admits() -> None:
    snap = _quota_snapshot(borrowing_limit=8, cohort="pool")
    assert admitted(plan_for(snap)) == {"wide"}


def test_a_queue_over_its_lowered_quota_does_not_stop_another_queue_from_admitting() -> None:
    # team-a's quota was cut to 4 while it uses 6: it takes nothing more, team-b still admits.
    over = gpu_queue("team-a", gpus=4).model_copy(update={"usage": {"default": {"nvidia.com/gpu": 6}}})
    snap = snapshot(
        [node("n1"), node("n2")],
        [workload("more", pods(1, 1), queue="lq-a"), workload("other", pods(1, 8), queue="lq-b")],
        cluster_queues=[over, gpu_queue("team-b", gpus=8)],
        local_queues=[
            LocalQueue(namespace="default", name="lq-a", cluster_queue="team-a"),
            LocalQueue(namespace="default", name="lq-b", cluster_queue="team-b"),
        ],
        flavors=[ResourceFlavor(name="default")],
    )
    assert admitted(plan_for(snap)) == {"other"}


# -- NVLink islands -------------------------------------------------------------------------------


def test_two_gpu_pods_land_inside_nvlink_pairs() -> None:
    # GPUs 1 and 2 are taken: pairs (4,5) and (6,7) are whole, (0,1) and (2,3) are broken.
    snap = snapshot(
        [node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)],
        [workload("p1", pods(1, 2)), workload("p2", pods(1, 2))],
        usage={"a1": used_gpus(1, 2)},
    )
    plan = plan_for(snap)
    pairs = {tuple(p) for p in PAIRS}
    for name in ("p1", "p2"):
        (gpus,) = gpus_of(plan, name)
        assert gpus is not None and tuple(gpus) in pairs


def test_nvlink_required_is_deferred_when_no_pair_is_whole() -> None:
    usage = {"a1": used_gpus(0, 2, 4, 6)}
    nodes = [node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)]
    required = snapshot(nodes, [workload("strict", pods(1, 2, nvlink_required=True))], usage=usage)
    assert admitted(plan_for(required)) == set()
    relaxed = snapshot(nodes, [workload("loose", pods(1, 2))], usage=usage)
    assert admitted(plan_for(relaxed)) == {"loose"}


def test_nvlink_required_skips_a_single_island_node_whose_used_gpus_have_unknown_indices() -> None:
    # Two GPUs of the NVSwitch board are taken without indices: no island can be promised there,
    # so the pod goes to the board whose free GPUs are known, and waits when there is none.
    unknown = NodeUsage(unknown_index_gpus=2, gpu_milli=(0,) * 8, gpu_mem_mib=(0,) * 8, pods=1)
    strict = workload("strict", pods(1, 2, nvlink_required=True))
    alone = snapshot([node("h1")], [strict], usage={"h1": unknown})
    assert admitted(plan_for(alone)) == set()
    beside = snapshot([node("h1"), node("h2")], [strict], usage={"h1": unknown})
    assert nodes_of(plan_for(beside), "strict") == ["h2"]


def test_a_pod_too_big_for_a_boxs_islands_goes_where_one_island_holds_it() -> None:
    # A 4-GPU pod fits both empty nodes; only the NVSwitch board holds it in one island.
    for order in (("a1", "h1"), ("h1", "a1")):
        boxes = {
            "a1": node("a1", product=A100, islands=PAIRS, gpu_mem=40_960),
            "h1": node("h1", product=H100),
        }
        snap = snapshot([boxes[name] for name in order], [workload("four", pods(1, 4))])
        assert nodes_of(plan_for(snap), "four") == ["h1"]


def test_a_gang_keeps_its_rack_rather_than_chasing_nvswitch_boards() -> None:
    # The A100 boxes of rack r1 hold the whole gang; the NVSwitch boards are one per rack elsewhere.
    nodes = [
        node("a1", product=A100, islands=PAIRS, gpu_mem=40_960, rack="r1"),
        node("a2", product=A100, islands=PAIRS, gpu_mem=40_960, rack="r1"),
        node("h1", rack="r2"),
        node("h2", rack="r3"),
    ]
    snap = snapshot(nodes, [workload("gang", pods(2, 8, preferred_topology=RACK))])
    assert sorted(nodes_of(plan_for(snap), "gang")) == ["a1", "a2"]


# -- inter-node topology --------------------------------------------------------------------------


def test_required_rack_gang_lands_in_one_rack() -> None:
    nodes = [node(f"x{i}", rack="r1") for i in range(3)] + [node(f"y{i}", rack="r2") for i in range(4)]
    snap = snapshot(nodes, [workload("gang", pods(4, 8, required_topology=RACK))])
    plan = plan_for(snap)
    assert sorted(nodes_of(plan, "gang")) == ["y0", "y1", "y2", "y3"]


def test_required_rack_gang_is_deferred_when_no_rack_holds_it() -> None:
    nodes = [node(f"x{i}", rack="r1") for i in range(3)] + [node(f"y{i}", rack="r2") for i in range(3)]
    snap = snapshot(nodes, [workload("gang", pods(4, 8, required_topology=RACK))])
    assert admitted(plan_for(snap)) == set()


def test_preferred_rack_gang_spans_the_fewest_racks() -> None:
    # Rack r1 comes first in node order and has two nodes; r2 can hold the whole gang.
    nodes = [node(f"x{i}", rack="r1") for i in range(2)] + [node(f"y{i}", rack="r2") for i in range(3)]
    snap = snapshot(nodes, [workload("gang", pods(3, 8, preferred_topology=RACK))])
    plan = plan_for(snap)
    assert sorted(nodes_of(plan, "gang")) == ["y0", "y1", "y2"]


# -- priority -------------------------------------------------------------------------------------


def test_high_priority_pod_wins_over_older_low_priority_pods() -> None:
    snap = snapshot(
        [node("n1")],
        [
            workload("low1", pods(1, 4), priority=0, age=3600),
            workload("low2", pods(1, 4), priority=0, age=3600),
            workload("high", pods(1, 8), priority=1000, age=0),
        ],
    )
    plan = plan_for(snap)
    assert admitted(plan) == {"high"}
    assert plan.objective["priority:1000"] == 8.0


# -- packing --------------------------------------------------------------------------------------


def test_one_gpu_pod_goes_to_the_partly_used_node() -> None:
    snap = snapshot(
        [node("empty"), node("busy")],
        [workload("small", pods(1, 1))],
        usage={"busy": used_gpus(0, 1, 2, 3, mem=81_920)},
    )
    plan = plan_for(snap)
    assert nodes_of(plan, "small") == ["busy"]


# -- ageing ---------------------------------------------------------------------------------------


def test_ageing_prefers_the_long_waiting_gang_over_fresh_work_of_equal_size() -> None:
    # Both choices fill the node with 8 GPUs; only the ageing bonus tells them apart.
    snap = snapshot(
        [node("n1")],
        [
            workload("fresh1", pods(1, 4), age=0),
            workload("fresh2", pods(1, 4), age=0),
            workload("waiting", pods(2, 4), age=10 * 3600),
        ],
    )
    plan = plan_for(snap)
    assert admitted(plan) == {"waiting"}
    assert plan.objective["priority:0"] > 8.0


def test_a_reserved_workload_keeps_its_flavor_and_needs_no_more_quota() -> None:
    gpu = "nvidia.com/gpu"
    queue = ClusterQueue(
        name="cq",
        resource_groups=(
            ResourceGroup(
                covered_resources=(gpu,),
                flavors=tuple(
                    FlavorQuota(name=f, resources=(ResourceQuota(name=gpu, nominal=0),))
                    for f in ("h100", "a100")
                ),
            ),
        ),
    )
    flavors = [
        ResourceFlavor(name="h100", node_labels={PRODUCT_LABEL: H100}),
        ResourceFlavor(name="a100", node_labels={PRODUCT_LABEL: A100}),
    ]
    reservation = QuotaReservation(cluster_queue="cq", flavors={"main": {gpu: "a100"}})
    reserved = workload("reserved", pods(1, 2), queue="lq").model_copy(update={"reservation": reservation})
    snap = snapshot(
        [node("h1"), node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)],
        [reserved, workload("unreserved", pods(1, 2), queue="lq")],
        cluster_queues=[queue],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="cq")],
        flavors=flavors,
    )
    plan = plan_for(snap)
    assert admitted(plan) == {"reserved"}
    assert nodes_of(plan, "reserved") == ["a1"]


def test_a_gpu_whose_memory_is_over_used_takes_only_shares_without_memory() -> None:
    # The snapshot shows 20,000 MiB in use on a 16,384 MiB GPU (built in code: ingest would clamp it).
    over = NodeUsage(gpu_milli=(300, 0), gpu_mem_mib=(20_000, 0), pods=1)
    snap = snapshot(
        [node("t1", gpus=2, product=T4, islands=[], gpu_mem=16_384)],
        [
            workload("mem", pods(1, 1, gpu_milli=250, gpu_mem=4_000)),
            workload("compute", pods(1, 1, gpu_milli=250)),
        ],
        usage={"t1": over},
    )
    plan = plan_for(snap)
    assert admitted(plan) == {"mem", "compute"}
    assert gpus_of(plan, "mem") == [(1,)]
    assert gpus_of(plan, "compute") == [(0,)]  # compute is free there, and it takes no memory
    assert not [w for w in plan.warnings if "no solution" in w]


# -- flavors that overlap ---------------------------------------------------------------------------


def _overlapping(a100_gpus: int, *workloads: Workload, nodes: list[Node] | None = None) -> Snapshot:
    """Flavor ``a100`` (the A100 boxes) comes first; ``any`` has no node labels, so it accepts every node."""

    def quota(name: str, gpus: int) -> FlavorQuota:
        return gpu_queue("q", gpus=gpus, flavor=name).resource_groups[0].flavors[0]

    group = (
        gpu_queue("q", gpus=0)
        .resource_groups[0]
        .model_copy(update={"flavors": (quota("a100", a100_gpus), quota("any", 8))})
    )
    return snapshot(
        nodes or [node("a1", product=A100, islands=PAIRS, gpu_mem=40_960)],
        list(workloads),
        cluster_queues=[ClusterQueue(name="q", resource_groups=(group,))],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="q")],
        flavors=[ResourceFlavor(name="a100", node_labels={PRODUCT_LABEL: A100}), ResourceFlavor(name="any")],
    )


def test_a_node_may_be_used_under_a_later_flavor_when_the_first_one_has_no_quota_left() -> None:
    # Kueue gives the PodSet flavor "any" when a100's quota is used up, and "any" accepts the A100 box.
    snap = _overlapping(0, workload("w", pods(2, 2), queue="lq"), workload("v", pods(1, 2), queue="lq"))
    plan = plan_for(snap)
    assert admitted(plan) == {"w", "v"}
    decision = plan.decision("default/w")
    assert decision is not None and decision.pod_sets[0].flavor == "any"
    assert not [w for w in plan.warnings if "no solution" in w or "greedy BestFit" in w]


def test_shares_under_two_flavors_on_one_gpu_never_exceed_it() -> None:
    t4 = node("t1", gpus=1, product=T4, islands=[], gpu_mem=16_384, labels={PRODUCT_LABEL: A100})
    snap = _overlapping(8, workload("pair", pods(2, 1, gpu_milli=600), queue="lq"), nodes=[t4])
    assert admitted(plan_for(snap)) == set()
    one = _overlapping(8, workload("one", pods(1, 1, gpu_milli=600), queue="lq"), nodes=[t4])
    assert gpus_of(plan_for(one), "one") == [(0,)]
