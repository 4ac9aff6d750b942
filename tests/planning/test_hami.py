"""Plans on HAMi nodes: running vGPU pods hold their GPUs, ``nvidia.com/gpu: N`` shares use N GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from optsched import planning
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import Snapshot
from optsched.snapshot.build import snapshot_from_objects
from optsched.validate import check_plan
from tests.snapshot.test_hami import GPU1, GTX_COLONS, hami_node, vgpu_pod
from tests.solver.helpers import FAST

POLICIES = ["optimizer", "bestfit", "fgd", "firstfit", "tas"]
RUNNING_VGPU = vgpu_pod(
    "vgpu",
    {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30},
    {"hami.io/vgpu-devices-allocated": f"{GPU1},NVIDIA,1000,30:;"},
)


def pending(name: str, resources: dict[str, Any], count: int = 1) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "1", **resources}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": [container]}}}],
        },
    }


def solved(snap: Snapshot, policy: str) -> Plan:
    plan = planning.plan(snap, FAST, policy)
    assert check_plan(snap, plan) == []
    assert plan.status is not PlanStatus.FALLBACK, plan.warnings
    return plan


def gpus_of(plan: Plan, name: str) -> list[tuple[int, ...] | None] | None:
    decision = plan.decision(f"ns/{name}")
    assert decision is not None
    if decision.decision != "admit":
        return None
    return [pod.gpus for ps in decision.pod_sets for pod in ps.pods]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_exclusive_two_gpu_pod_waits_while_a_vgpu_pod_holds_one_of_two_gpus(policy: str) -> None:
    # HAMi advertises 20 nvidia.com/gpu on this node: 2 GPUs split 10 ways.
    snap = snapshot_from_objects(
        [hami_node(advertised=20), RUNNING_VGPU, pending("two", {"nvidia.com/gpu": 2})]
    )
    plan = solved(snap, policy)
    assert gpus_of(plan, "two") is None


@pytest.mark.parametrize("policy", POLICIES)
def test_an_exclusive_one_gpu_pod_takes_the_gpu_no_vgpu_pod_uses(policy: str) -> None:
    snap = snapshot_from_objects(
        [hami_node(advertised=20), RUNNING_VGPU, pending("one", {"nvidia.com/gpu": 1})]
    )
    assert gpus_of(solved(snap, policy), "one") == [(0,)]


@pytest.mark.parametrize("policy", POLICIES)
def test_two_gpus_with_gpumem_are_two_shares_on_two_gpus(policy: str) -> None:
    # 3000 MiB still fits next to the vGPU pod's 1000 MiB on a 4096 MiB GPU.
    share = pending("shares", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000})
    snap = snapshot_from_objects([hami_node(), RUNNING_VGPU, share])
    assert gpus_of(solved(snap, policy), "shares") == [(0, 1)]


@pytest.mark.parametrize("policy", POLICIES)
def test_shares_of_several_gpus_fill_each_gpu_and_no_more(policy: str) -> None:
    # Each 4096 MiB GPU holds two 2000 MiB shares: two pods of two shares fit, a third does not.
    fits = pending("fits", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 2000}, count=2)
    plan = solved(snapshot_from_objects([hami_node(), fits]), policy)
    assert gpus_of(plan, "fits") == [(0, 1), (0, 1)]
    too_many = pending("too-many", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 2000}, count=3)
    assert gpus_of(solved(snapshot_from_objects([hami_node(), too_many]), policy), "too-many") is None


@pytest.mark.parametrize("policy", ["optimizer", "bestfit"])
def test_no_gpu_takes_more_tasks_than_its_split_count(policy: str) -> None:
    # Split count 2: four tiny shares fit on two GPUs, though memory would take many more.
    node = hami_node(register=GTX_COLONS.replace(",10,4096,", ",2,4096,"), advertised=4)
    four = pending("four", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}, count=4)
    five = pending("five", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}, count=5)
    assert sorted(gpus_of(solved(snapshot_from_objects([node, four]), policy), "four") or []) == [
        (0,),
        (0,),
        (1,),
        (1,),
    ]
    assert gpus_of(solved(snapshot_from_objects([node, five]), policy), "five") is None


@pytest.mark.parametrize("policy", ["optimizer", "bestfit"])
def test_a_cores_only_share_takes_all_of_a_hami_gpus_memory(policy: str) -> None:
    # HAMi gives a share that names no memory all of it, so it cannot join the running vGPU pod.
    snap = snapshot_from_objects(
        [
            hami_node(),
            RUNNING_VGPU,
            pending("cores", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 20}, count=2),
        ]
    )
    assert gpus_of(solved(snap, policy), "cores") is None
    alone = snapshot_from_objects(
        [hami_node(), RUNNING_VGPU, pending("cores", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 20})]
    )
    assert gpus_of(solved(alone, policy), "cores") == [(0,)]


@pytest.mark.parametrize("policy", ["optimizer", "bestfit"])
def test_nvlink_required_binds_whole_gpu_pods_only(policy: str) -> None:
    # No NVLink on this node: each GPU is its own island, yet a pod of two shares is placed.
    share = pending("shares", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000})
    template = share["spec"]["podSets"][0]["template"]
    template["metadata"] = {"annotations": {"optsched.io/nvlink": "required"}}
    assert gpus_of(solved(snapshot_from_objects([hami_node(), share]), policy), "shares") == [(0, 1)]


def _queue_objects(gpumem: int) -> list[dict[str, Any]]:
    resources = [
        {"name": "cpu", "nominalQuota": 100},
        {"name": "nvidia.com/gpu", "nominalQuota": 8},
        {"name": "nvidia.com/gpumem", "nominalQuota": gpumem},
    ]
    group = {
        "coveredResources": [r["name"] for r in resources],
        "flavors": [{"name": "default", "resources": resources}],
    }
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [group]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


@pytest.mark.parametrize("policy", ["optimizer", "bestfit"])
def test_kueue_quota_charges_gpumem_as_the_pod_spec_writes_it(policy: str) -> None:
    # Each pod is two devices of 1000 MiB: Kueue charges 1000 gpumem per pod, not 2000.
    two = {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000}
    snap = snapshot_from_objects([hami_node(), *_queue_objects(2000), pending("a", two), pending("b", two)])
    plan = solved(snap, policy)
    assert gpus_of(plan, "a") == [(0, 1)] and gpus_of(plan, "b") == [(0, 1)]
    tight = snapshot_from_objects([hami_node(), *_queue_objects(1500), pending("a", two), pending("b", two)])
    assert len(solved(tight, policy).admitted) == 1


def test_a_gpu_whose_task_slots_are_all_taken_is_not_free_though_no_memory_is_reserved() -> None:
    """A HAMi record may reserve no memory and no cores; its task slots are still taken."""
    from optsched import planning
    from optsched.model.snapshot import NodeUsage, Snapshot
    from tests.builders import node as plain_node
    from tests.builders import pods, workload

    hami = plain_node("h1", gpus=1).model_copy(
        update={"gpu_split": 2, "hami": True, "gpu_memory_mib": 15_360}
    )
    usage = NodeUsage(gpu_milli=(0,), gpu_mem_mib=(0,), gpu_tasks=(2,), pods=2)
    snapshot = Snapshot(
        nodes=(hami,),
        usage={"h1": usage},
        workloads=(workload("share", pods(1, 1, gpu_milli=250)), workload("whole", pods(1, 1))),
    )
    for policy in ("optimizer", "bestfit", "firstfit", "fgd", "tas", "leastallocated"):
        plan = planning.plan(snapshot, policy=policy)
        assert plan.admitted == [], policy
