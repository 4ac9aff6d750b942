"""check_plan: a pod's gpuUUIDs match its gpus and its node; dra only where a claim can pin the GPUs."""

from __future__ import annotations

from optsched.model.placement import Enforcement, PodPlacement
from optsched.model.plan import Decision, Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import GpuMode, Node, Snapshot
from optsched.validate import check_plan
from tests.builders import node, pods, snapshot, workload

UUIDS = tuple(f"GPU-d{i}" for i in range(8))


def dra() -> Node:
    return node("dra-1").model_copy(update={"gpu_mode": GpuMode.DRA, "gpu_uuids": UUIDS})


def _snapshot(*nodes: Node, shares: bool = False) -> Snapshot:
    gpu_milli = 500 if shares else 1000
    return snapshot(
        list(nodes),
        [workload("a", pods(1, 2, gpu_milli=gpu_milli)), workload("b", pods(1, 2, gpu_milli=gpu_milli))],
    )


def _plan(a: PodPlacement, b: PodPlacement | None = None) -> Plan:
    decisions = [
        WorkloadDecision(
            name="default/a", decision=Decision.ADMIT, pod_sets=[PodSetPlacement(name="main", pods=[a])]
        )
    ]
    if b is None:
        decisions.append(WorkloadDecision(name="default/b", decision=Decision.DEFER))
    else:
        decisions.append(
            WorkloadDecision(
                name="default/b", decision=Decision.ADMIT, pod_sets=[PodSetPlacement(name="main", pods=[b])]
            )
        )
    return Plan(status=PlanStatus.HEURISTIC, workloads=decisions)


def placed(
    gpus: tuple[int, ...], uuids: tuple[str, ...] | None, how: Enforcement | None = None, at: str = "dra-1"
) -> PodPlacement:
    return PodPlacement(index=0, node=at, gpus=gpus, gpu_uuids=uuids, enforcement=how)


def test_a_consistent_dra_pod_passes() -> None:
    assert check_plan(_snapshot(dra()), _plan(placed((0, 1), UUIDS[:2], Enforcement.DRA))) == []


def test_dra_on_a_device_plugin_node_is_refused() -> None:
    plugin = node("dp-1").model_copy(update={"gpu_uuids": UUIDS})
    (violation,) = check_plan(_snapshot(plugin), _plan(placed((0, 1), UUIDS[:2], Enforcement.DRA, at="dp-1")))
    assert "enforcement dra on node dp-1, which is not a DRA node" in violation


def test_dra_without_uuids_is_refused() -> None:
    (violation,) = check_plan(_snapshot(dra()), _plan(placed((0, 1), None, Enforcement.DRA)))
    assert "enforcement dra without the GPUs' UUIDs" in violation


def test_uuids_must_be_as_many_as_gpus_and_those_of_the_node_at_those_indices() -> None:
    violations = check_plan(_snapshot(dra()), _plan(placed((0, 1), ("GPU-d0",))))
    assert any("lists 1 GPU UUIDs for 2 GPUs" in v for v in violations)
    violations = check_plan(_snapshot(dra()), _plan(placed((0, 1), ("GPU-d1", "GPU-x"))))
    assert any("GPU-d1 is not the UUID of GPU 0" in v for v in violations)
    assert any("GPU UUID GPU-x is not a GPU of node dra-1" in v for v in violations)


def test_a_uuid_given_whole_to_two_pods_is_refused_but_shares_of_one_gpu_may_repeat_it() -> None:
    a, b = placed((0, 1), UUIDS[:2]), placed((1, 2), UUIDS[1:3])
    violations = check_plan(_snapshot(dra()), _plan(a, b))
    assert any("GPU UUID GPU-d1 is also given to workload default/a" in v for v in violations)
    assert not any("GPU UUID" in v for v in check_plan(_snapshot(dra(), shares=True), _plan(a, b)))
