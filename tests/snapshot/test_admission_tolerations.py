"""ExtendedResourceToleration, as the API server applies it, and where planning and the validator use it."""

from __future__ import annotations

from optsched import planning
from optsched.capacity.eligibility import node_verdict
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import ResourceFlavor, Taint, Toleration
from optsched.planning.planner import effective_snapshot
from optsched.settings import Settings
from optsched.snapshot.scheduling import extended_resource_tolerations
from optsched.validate import check_plan
from tests.builders import node, pods, snapshot, workload

GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


def _tolerating(*keys: str) -> tuple[Toleration, ...]:
    return tuple(Toleration(key=k, operator="Exists", effect="NoSchedule") for k in keys)


def test_every_extended_resource_of_containers_and_init_containers_is_tolerated() -> None:
    spec = {
        "initContainers": [{"resources": {"requests": {"example.com/fpga": 1, "cpu": "1"}}}],
        "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "memory": "1Gi"}}},
            {"resources": {"requests": {"nvidia.com/mig-1g.10gb": 2, "hugepages-2Mi": "2Mi"}}},
            {"resources": {"requests": {"kubernetes.io/batch-cpu": 1, "requests.example.com/x": 1}}},
            {"name": "no-resources"},
        ],
    }
    assert extended_resource_tolerations(spec) == _tolerating(
        "example.com/fpga", "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/mig-1g.10gb"
    )
    assert extended_resource_tolerations({"containers": "not a list"}) == ()


def test_the_admission_toleration_passes_node_taints_but_not_flavor_taints() -> None:
    gpu_pod = pods(1, 1).model_copy(update={"admission_tolerations": _tolerating("nvidia.com/gpu")})
    tainted = node("g1", taints=(GPU_TAINT,))
    assert node_verdict(tainted, gpu_pod, None).ok
    assert not node_verdict(tainted, pods(1, 1), None).ok
    # Kueue checks a flavor's nodeTaints against the template before any pod (or toleration) exists.
    flavor = ResourceFlavor(name="gpu", node_taints=(GPU_TAINT,))
    assert node_verdict(node("g1"), gpu_pod, flavor).reason == "flavor gpu taint nvidia.com/gpu:NoSchedule"
    executes = node("g2", taints=(Taint(key="nvidia.com/gpu", effect="NoExecute"),))
    assert not node_verdict(executes, gpu_pod, None).ok  # the plugin tolerates NoSchedule only


def test_the_setting_off_plans_with_the_template_tolerations_only_and_the_validator_agrees() -> None:
    gpu_pod = pods(1, 1).model_copy(update={"admission_tolerations": _tolerating("nvidia.com/gpu")})
    snap = snapshot([node("g1", taints=(GPU_TAINT,))], [workload("job", gpu_pod)])
    on = planning.plan(snap, Settings(workers=1))
    assert [d.name for d in on.admitted] == ["default/job"]
    assert check_plan(snap, on) == []
    off_settings = Settings(workers=1, extended_resource_toleration=False)
    off = planning.plan(snap, off_settings)
    assert [d.name for d in off.deferred] == ["default/job"]
    as_planned = effective_snapshot(snap, off_settings)
    assert as_planned.workloads[0].pod_sets[0].admission_tolerations == ()
    placed = Plan(
        status=PlanStatus.HEURISTIC,
        policy="test",
        workloads=[
            WorkloadDecision(
                name="default/job",
                decision="admit",
                pod_sets=[PodSetPlacement(name="main", pods=[PodPlacement(index=0, node="g1", gpus=(0,))])],
            )
        ],
    )
    assert check_plan(snap, placed) == []
    (violation,) = check_plan(as_planned, placed)
    assert "node taint nvidia.com/gpu=present:NoSchedule not tolerated" in violation
