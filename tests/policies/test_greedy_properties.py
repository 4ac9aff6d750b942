"""Whatever the cluster and queue, every baseline's plan passes the independent validator."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import planning
from optsched.capacity.state import ClusterState
from optsched.model.snapshot import LocalQueue, NodeUsage, ResourceFlavor, Snapshot, Taint, Toleration
from optsched.planning import POLICIES
from optsched.validate import check_plan
from tests.builders import A100, RACK, gpu_queue, node, pods, snapshot, workload

TAINT = Taint(key="pool", value="infer", effect="NoSchedule")


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    nodes = []
    usage = {}
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.sampled_from([2, 4, 8]))
        islands = draw(st.sampled_from([None, [[g, g + 1] for g in range(0, gpus, 2)]]))
        nodes.append(
            node(
                f"n{i}",
                gpus=gpus,
                islands=islands,
                product=draw(st.sampled_from([A100, "NVIDIA-H100-80GB-HBM3"])),
                rack=draw(st.sampled_from(["r1", "r2"])),
                cpu=draw(st.sampled_from([8000, 64000])),
                taints=(TAINT,) if draw(st.booleans()) and i else (),
                unhealthy=frozenset({0}) if draw(st.integers(0, 5)) == 0 else frozenset(),
            )
        )
        busy = draw(st.lists(st.sampled_from([0, 0, 300, 1000]), min_size=gpus, max_size=gpus))
        unknown = draw(st.sampled_from([0, 0, 1]))
        usage[f"n{i}"] = NodeUsage(gpu_milli=tuple(busy), unknown_index_gpus=unknown)
    workloads = []
    for j in range(draw(st.integers(1, 7))):
        count = draw(st.integers(1, 3))
        share = draw(st.integers(0, 4)) == 0
        pod_set = pods(
            count,
            1 if share else draw(st.sampled_from([1, 2, 4, 8])),
            gpu_milli=500 if share else 1000,
            cpu=draw(st.sampled_from([1000, 6000])),
            min_count=draw(st.sampled_from([None, 1])) if count > 1 else None,
            required_topology=RACK if draw(st.integers(0, 3)) == 0 else None,
            preferred_topology=RACK if draw(st.integers(0, 3)) == 0 else None,
            nvlink_required=draw(st.integers(0, 4)) == 0,
            tolerations=(Toleration(key="pool", operator="Exists"),) if draw(st.booleans()) else (),
        )
        workloads.append(
            workload(
                f"w{j}",
                pod_set,
                priority=draw(st.sampled_from([0, 5])),
                queue=draw(st.sampled_from(["a", "b"])),
            )
        )
    return snapshot(
        nodes,
        workloads,
        usage=usage,
        cluster_queues=[
            gpu_queue(
                "team-a",
                gpus=draw(st.integers(0, 16)),
                cohort="c",
                borrowing_limit=draw(st.sampled_from([None, 0, 4])),
            ),
            gpu_queue("team-b", gpus=draw(st.integers(0, 16)), cohort=draw(st.sampled_from([None, "c"]))),
        ],
        local_queues=[
            LocalQueue(namespace="default", name="a", cluster_queue="team-a"),
            LocalQueue(namespace="default", name="b", cluster_queue="team-b"),
        ],
        flavors=[ResourceFlavor(name="default")],
    )


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([p for p in POLICIES if p != "optimizer"]))
def test_every_baseline_plan_is_valid(snap: Snapshot, policy: str) -> None:
    plan = planning.plan(snap, policy=policy)
    assert check_plan(snap, plan) == []
    assert len(plan.workloads) == len(snap.workloads)
    for decision in plan.deferred:
        assert decision.reasons
    summary = plan.summary
    assert summary.gpus_admitted == pytest.approx(sum(w.gpus for w in plan.admitted))
    if all(n.free_gpu_milli >= 0 for n in ClusterState.from_snapshot(snap).nodes):
        # A share left to the node takes a whole GPU of unknown index: the rest of it is not free.
        unplaced_rest = sum(
            1 - ps.request.gpu_equivalent
            for w in plan.admitted
            for ps in next(s for s in snap.workloads if s.key == w.name).pod_sets
            if ps.request.is_share
            for placed in w.pod_sets
            if placed.name == ps.name
            for pod in placed.pods
            if pod.gpus is None
        )
        expected = summary.gpus_free_before - summary.gpus_admitted - unplaced_rest
        assert summary.gpus_free_after == pytest.approx(expected, abs=1e-3)
    assert summary.workloads_admitted + summary.workloads_deferred == len(snap.workloads)
