"""The optimizer end to end: the FIFO trap, fallback, stability, the planning window."""

from __future__ import annotations

from optsched.model.plan import PlanStatus
from optsched.model.snapshot import Snapshot
from optsched.policies.choosers import BestFit
from optsched.policies.greedy import greedy_placement
from optsched.settings import Settings
from optsched.validate import check_plan
from tests.builders import A100, RACK, node, pods, snapshot, workload
from tests.solver.helpers import FAST, admitted, nodes_of, plan_for


def fifo_trap() -> Snapshot:
    """Four empty 8-GPU nodes; in creation order four 6-GPU pods, then a 4-pod gang of 8-GPU pods.

    FIFO BestFit places each 6-GPU pod on its own node (no node can hold two), leaving
    2 GPUs on every node, so the gang no longer fits: 4 x 6 = 24 of 32 GPUs. Deferring the
    four small pods and admitting the gang uses all 32; no plan can admit more than the
    32 GPUs that exist, so 32 is the optimum.
    """
    nodes = [node(f"n{i}") for i in range(4)]
    queue = [workload(f"six{i}", pods(1, 6)) for i in range(4)] + [workload("gang", pods(4, 8))]
    return snapshot(nodes, queue)


def test_fifo_trap_greedy_admits_24_of_32() -> None:
    greedy = greedy_placement(fifo_trap(), BestFit())
    gpus = sum(6 for key in greedy.admitted if "six" in key) + (
        32 if "default/gang" in greedy.admitted else 0
    )
    assert gpus == 24


def test_fifo_trap_optimizer_admits_all_32() -> None:
    plan = plan_for(fifo_trap())
    assert plan.summary.gpus_admitted == 32
    assert admitted(plan) == {"gang"}
    assert plan.status == PlanStatus.OPTIMAL
    assert plan.gap == 0.0


def test_forced_fallback_returns_the_valid_greedy_plan() -> None:
    snap = fifo_trap()
    plan = plan_for(snap, FAST.model_copy(update={"force_fallback": True}), allow_fallback=True)
    assert plan.status == PlanStatus.FALLBACK
    assert plan.summary.gpus_admitted == 24
    assert plan.warnings == [
        "the plan is the greedy BestFit placement: the solver is switched off in the settings"
    ]


def test_tiny_time_limit_still_gives_a_valid_plan() -> None:
    snap = fifo_trap()
    plan = plan_for(snap, Settings(time_limit_s=0.001, workers=1), allow_fallback=True)
    assert plan.status in (PlanStatus.FALLBACK, PlanStatus.FEASIBLE, PlanStatus.OPTIMAL)
    assert plan.summary.gpus_admitted >= 24


def test_empty_queue_is_an_empty_plan() -> None:
    plan = plan_for(snapshot([node("n1")], []))
    assert plan.status == PlanStatus.EMPTY and plan.workloads == []


def test_previous_plan_is_kept_when_nothing_changed() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    snap = snapshot(nodes, [workload("a", pods(1, 2)), workload("b", pods(2, 4))])
    first = plan_for(snap)
    second = plan_for(snap, previous=first)
    assert [w.model_dump() for w in second.workloads] == [w.model_dump() for w in first.workloads]
    assert second.objective["stability"] == 0.0


def test_workloads_past_the_window_are_deferred_with_a_reason() -> None:
    nodes = [node("n1")]
    queue = [workload("first", pods(1, 8)), workload("second", pods(1, 8)), workload("third", pods(1, 8))]
    snap = snapshot(nodes, queue)
    plan = plan_for(snap, FAST.model_copy(update={"window_factor": 1.0, "min_window": 1}))
    assert admitted(plan) == {"first"}
    third = plan.decision("default/third")
    assert third is not None and "beyond the planning window" in [r.message for r in third.reasons]


def test_plan_is_deterministic_with_one_worker() -> None:
    snap = fifo_trap()
    one = plan_for(snap)
    two = plan_for(snap)
    assert [w.model_dump() for w in one.workloads] == [w.model_dump() for w in two.workloads]
    assert check_plan(snap, two) == []


def test_pruned_candidates_still_offer_a_whole_required_rack() -> None:
    # Racks r1 and r2 hold two nodes each, r3 holds three: only r3 can host the 3-pod gang.
    racks = ["r1", "r1", "r2", "r2", "r3", "r3", "r3"]
    nodes = [node(f"n{i}", rack=rack) for i, rack in enumerate(racks)]
    queue = [workload("gang", pods(3, 8, required_topology=RACK)), workload("solo", pods(1, 8))]
    tight = FAST.model_copy(update={"candidates_per_podset": 2, "min_candidates": 1})
    plan = plan_for(snapshot(nodes, queue), tight)
    assert admitted(plan) == {"gang", "solo"}
    assert sorted(nodes_of(plan, "gang")) == ["n4", "n5", "n6"]
    assert any("planned on a bounded list of about" in w for w in plan.warnings)


def test_each_stage_is_solved_once_in_lexicographic_order() -> None:
    # An nvlink-required PodSet makes island counts part of the admission model; its
    # preference terms must still be solved in the single topology stage.
    pairs = [[0, 1], [2, 3], [4, 5], [6, 7]]
    nodes = [node("a1", product=A100, islands=pairs, gpu_mem=40_960), node("h1")]
    queue = [workload("strict", pods(1, 2, nvlink_required=True)), workload("gang", pods(2, 4))]
    plan = plan_for(snapshot(nodes, queue))
    stages = [line.split()[1].rstrip(":") for line in plan.solver_log if line.startswith("stage ")]
    assert stages == ["priority:0", "topology", "packing", "nvlink-fit"]
    assert list(plan.objective) == ["priority:0", "topology", "packing", "nvlink-fit", "gpus"]
