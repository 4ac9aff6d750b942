"""Property: on small random clusters every optimizer plan is valid and admits at least what BestFit does."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import planning
from optsched.model.plan import Plan
from optsched.model.snapshot import FULL_GPU_MILLI, Node, NodeUsage, Snapshot, Workload
from optsched.validate import check_plan
from tests.builders import A100, RACK, node, pods, snapshot, workload
from tests.solver.helpers import FAST, plan_for

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    nodes: list[Node] = []
    usage: dict[str, NodeUsage] = {}
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["h100", "a100", "small"]))
        name = f"n{i}"
        rack = draw(st.sampled_from(["r1", "r2"]))
        if kind == "h100":
            nodes.append(node(name, rack=rack))
        elif kind == "a100":
            nodes.append(node(name, product=A100, islands=PAIRS, gpu_mem=40_960, rack=rack))
        else:
            nodes.append(node(name, gpus=4, rack=rack))
        gpus = nodes[-1].gpu_count
        taken = draw(st.sets(st.integers(0, gpus - 1), max_size=gpus // 2))
        shared = draw(st.sampled_from([None, *range(gpus)]))
        unknown = draw(st.sampled_from([0, 0, 1]))  # a GPU pod that did not say which GPU it holds
        if taken or shared is not None or unknown:
            milli = [FULL_GPU_MILLI if g in taken else 0 for g in range(gpus)]
            mem = [nodes[-1].gpu_memory_mib if g in taken else 0 for g in range(gpus)]
            if shared is not None and shared not in taken:
                milli[shared], mem[shared] = 500, 20_000
            usage[name] = NodeUsage(
                gpu_milli=tuple(milli), gpu_mem_mib=tuple(mem), pods=len(taken), unknown_index_gpus=unknown
            )
    queue: list[Workload] = []
    for j in range(draw(st.integers(1, 6))):
        count = draw(st.integers(1, 3))
        shape = draw(st.sampled_from(["share", "1", "2", "4", "8"]))
        priority = draw(st.sampled_from([0, 0, 100]))
        if shape == "share":
            pod_set = pods(count, 1, gpu_milli=draw(st.sampled_from([250, 500])), gpu_mem=10_000)
        else:
            pod_set = pods(
                count,
                int(shape),
                required_topology=RACK if draw(st.booleans()) and count > 1 else None,
                nvlink_required=draw(st.booleans()) and shape == "2",
                min_count=1 if count > 1 and draw(st.booleans()) else None,
            )
        queue.append(workload(f"w{j}", pod_set, priority=priority))
    return snapshot(nodes, queue, usage=usage)


def gpus_by_priority(plan: Plan) -> list[float]:
    levels = sorted({w.priority for w in plan.workloads}, reverse=True)
    return [sum(w.gpus for w in plan.admitted if w.priority == level) for level in levels]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([48, 1]))
def test_plans_are_valid_and_never_worse_than_bestfit(snap: Snapshot, candidates: int) -> None:
    # One candidate per PodSet forces the pruning path: the greedy plan's nodes must stay reachable.
    tight = {"time_limit_s": 3.0, "candidates_per_podset": candidates, "min_candidates": 1}
    plan = plan_for(snap, FAST.model_copy(update=tight))
    assert not any("could not be confirmed" in w for w in plan.warnings)
    assert plan.gap is None or plan.gap >= 0.0
    greedy = planning.plan(snap, policy="bestfit")
    assert check_plan(snap, greedy) == []
    # Lexicographic per priority level, highest first: never behind BestFit.
    mine, theirs = gpus_by_priority(plan), gpus_by_priority(greedy)
    assert mine >= theirs
