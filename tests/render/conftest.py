"""A small hand-built snapshot and plan, so the renderers are tested without any policy."""

from __future__ import annotations

import pytest

from optsched.model.placement import PodPlacement
from optsched.model.plan import (
    FlavorEligibility,
    Plan,
    PlanStatus,
    PlanSummary,
    PodSetPlacement,
    WorkloadDecision,
)
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import NodeUsage, Snapshot
from tests.builders import A100, T4, node, pods, snapshot, workload

DEFER_REASON = "needs 32 H100 GPUs in one rack; the fullest rack has 16 free"


@pytest.fixture
def small_snapshot() -> Snapshot:
    nodes = [
        node("h100-01", rack="r1"),
        node("h100-02", rack="r1"),
        node("h100-03", rack="r2"),
        node("a100-01", product=A100, gpus=4, islands=[[0, 1], [2, 3]], rack="r3", unhealthy=frozenset({3})),
        node("t4-01", product=T4, gpus=2, islands=[], rack="r3"),
    ]
    workloads = [
        workload("train", pods(2, 8), priority=100, namespace="ml"),
        workload("notebook", pods(1, 1, gpu_milli=250), namespace="ml"),
        workload("big", pods(4, 8), namespace="ml"),
    ]
    usage = {
        "h100-03": NodeUsage(gpu_milli=(1000, 1000, 500, 0, 0, 0, 0, 0)),
        "a100-01": NodeUsage(unknown_index_gpus=1),
    }
    return snapshot(nodes, workloads, usage=usage)


@pytest.fixture
def small_plan() -> Plan:
    return Plan(
        status=PlanStatus.OPTIMAL,
        solve_seconds=1.25,
        objective={"priority": 100.0, "admitted": 16.25, "topology": -2.0},
        bound=16.25,
        gap=0.0,
        workloads=[
            WorkloadDecision(
                name="ml/train",
                decision="admit",
                priority=100,
                gpus=16,
                pod_sets=[
                    PodSetPlacement(
                        name="main",
                        flavor="h100",
                        pods=[
                            PodPlacement(index=0, node="h100-01", gpus=list(range(8))),
                            PodPlacement(index=1, node="h100-02", gpus=list(range(8))),
                        ],
                    )
                ],
            ),
            WorkloadDecision(
                name="ml/notebook",
                decision="admit",
                gpus=0.25,
                pod_sets=[
                    PodSetPlacement(name="main", pods=[PodPlacement(index=0, node="h100-03", gpus=[2])])
                ],
            ),
            WorkloadDecision(
                name="ml/big",
                decision="defer",
                reasons=[
                    Reason(code=ReasonCode.TOPOLOGY_UNSATISFIABLE, message=DEFER_REASON),
                    Reason(code=ReasonCode.QUOTA_EXHAUSTED, message="quota: queue has 8 GPUs left"),
                ],
                eligibility=[
                    # What node filtering found in small_snapshot for an 8-GPU pod.
                    FlavorEligibility(
                        pod_set="main",
                        eligible=3,
                        excluded={"has 3 healthy GPUs, pod needs 8": 1, "has 2 healthy GPUs, pod needs 8": 1},
                    )
                ],
            ),
        ],
        summary=PlanSummary(
            gpus_total=45,
            gpus_free_before=40.5,
            gpus_free_after=24.25,
            gpus_admitted=16.25,
            fragmentation_before=3.5,
            fragmentation_after=1.25,
            stranded_gpus_before=2,
            stranded_gpus_after=0,
            workloads_admitted=2,
            workloads_deferred=1,
            pods_admitted=3,
            multi_gpu_pods=2,
            multi_gpu_pods_in_one_island=2,
            racks_per_gang=1.0,
        ),
        warnings=["Node bad-01: annotation optsched.io/gpu-topology is malformed; node left out of planning"],
    )
