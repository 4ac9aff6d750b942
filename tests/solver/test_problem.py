"""The problem value: the planning window and each PodSet's candidate nodes."""

from __future__ import annotations

from optsched.model.names import PRODUCT_LABEL
from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.model.snapshot import ClusterQueue, LocalQueue, QuotaReservation, ResourceFlavor
from optsched.solver.problem import build_problem
from tests.builders import A100, gpu_queue, node, pods, snapshot, workload
from tests.solver.helpers import FAST

NODES = [node(f"n{i}") for i in range(6)]


def test_the_window_is_the_queue_head_plus_what_the_greedy_plan_admits() -> None:
    queue = [workload(f"w{i}", pods(1, 8)) for i in range(4)]
    greedy = Placement(admitted={"default/w3": WorkloadAssignment()})
    narrow = FAST.model_copy(update={"window_factor": 0.2, "min_window": 1})
    problem = build_problem(snapshot(NODES[:1], queue), narrow, greedy)
    assert [w.workload.name for w in problem.workloads] == ["w0", "w3"]
    assert [w.name for w in problem.beyond_window] == ["w1", "w2"]


def test_candidates_carry_flavor_and_an_upper_bound_capped_at_the_count() -> None:
    problem = build_problem(snapshot(NODES[:2], [workload("w", pods(3, 2))]), FAST, Placement())
    (ps,) = problem.pod_sets
    assert [(o.node, o.flavor, o.ub) for o in ps.options] == [(0, None, 3), (1, None, 3)]


def test_a_bounded_candidate_list_keeps_the_greedy_plans_nodes() -> None:
    greedy = Placement(
        admitted={
            "default/w": WorkloadAssignment(pods={"main": [PodPlacement(index=0, node="n5", gpus=(0,))]})
        }
    )
    tight = FAST.model_copy(update={"candidates_per_podset": 1, "min_candidates": 1})
    problem = build_problem(snapshot(NODES, [workload("w", pods(1, 1))]), tight, greedy)
    (ps,) = problem.pod_sets
    assert 5 in {o.node for o in ps.options} and len(ps.options) <= 3
    assert problem.pruned == 1


def test_workloads_know_their_queue_and_age() -> None:
    snap = snapshot(
        NODES[:1],
        [
            workload("old", pods(1, 1), age=7200, queue="lq"),
            workload("held", pods(1, 1), age=0, queue="lq").model_copy(
                update={"reservation": QuotaReservation(cluster_queue="cq")}
            ),
        ],
        cluster_queues=[gpu_queue("cq", gpus=8)],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="cq")],
    )
    old, held = build_problem(snap, FAST, Placement()).workloads
    assert (old.cluster_queue, old.age_hours) == ("cq", 2.0)
    assert held.cluster_queue is None  # it holds its quota already


def _two_flavor_queue(a100_gpus: int, any_gpus: int) -> tuple[ClusterQueue, list[ResourceFlavor]]:
    """Flavor ``a100`` accepts the A100 boxes, ``any`` (no node labels) accepts every node."""
    a100 = gpu_queue("q", gpus=a100_gpus, flavor="a100").resource_groups[0].flavors[0]
    anywhere = gpu_queue("q", gpus=any_gpus, flavor="any").resource_groups[0].flavors[0]
    group = gpu_queue("q", gpus=0).resource_groups[0].model_copy(update={"flavors": (a100, anywhere)})
    flavors = [ResourceFlavor(name="a100", node_labels={PRODUCT_LABEL: A100}), ResourceFlavor(name="any")]
    return ClusterQueue(name="q", resource_groups=(group,)), flavors


def test_a_node_several_allowed_flavors_accept_is_an_option_under_each() -> None:
    queue, flavors = _two_flavor_queue(a100_gpus=8, any_gpus=8)
    snap = snapshot(
        [node("a1", product=A100, gpu_mem=40_960), node("h1")],
        [workload("w", pods(1, 2), queue="lq")],
        cluster_queues=[queue],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="q")],
        flavors=flavors,
    )
    (ps,) = build_problem(snap, FAST, Placement()).pod_sets
    assert [(o.node, o.flavor) for o in ps.options] == [(0, "a100"), (0, "any"), (1, "any")]
