"""Reasons name the resource that binds, with figures: too large for any node, and short right now."""

from __future__ import annotations

import pytest

from optsched import planning
from optsched.capacity.state import ClusterState
from optsched.model.plan import Plan
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import NodeUsage, Snapshot, Taint, Toleration, Workload
from optsched.planning.reasons import PlanContext, explain_deferral
from optsched.settings import Settings
from optsched.validate import check_plan
from tests.builders import A100, node, pods, snapshot, workload

MIG = "nvidia.com/mig-1g.10gb"
SETTINGS = Settings(workers=1, time_limit_s=5, random_seed=1)


def first(snap: Snapshot, wl: Workload) -> Reason:
    state = ClusterState.from_snapshot(snap)
    return explain_deferral(snap, wl, state, context=PlanContext(state_before=state))[0]


def planned(snap: Snapshot, policy: str) -> Plan:
    plan = planning.plan(snap, SETTINGS, policy)
    assert check_plan(snap, plan) == []
    return plan


# -- one pod larger than any node its filters allow -----------------------------------------------


@pytest.mark.parametrize("policy", ["optimizer", "bestfit", "tas"])
def test_a_worker_asking_more_cpu_than_any_node_is_deferred_and_the_rest_planned(policy: str) -> None:
    big = workload("big", pods(1, 0, name="worker", cpu=300_000))
    snap = snapshot([node("n1", cpu=96_000), node("n2", cpu=222_000)], [big, workload("train", pods(2, 8))])
    plan = planned(snap, policy)
    assert {d.name for d in plan.admitted} == {"default/train"}
    (reason,) = plan.decision("default/big").reasons  # type: ignore[union-attr]
    assert reason.message == (
        "pod set worker: a pod needs 300 CPUs; the largest node its filters allow (n2) has 222 CPUs, "
        "so it can never fit"
    )
    assert (reason.code, reason.permanent, reason.resource) == (ReasonCode.POD_TOO_LARGE, True, "cpu")
    assert (reason.needed, reason.available, reason.unit, reason.scope) == (300, 222, "cores", "node")


@pytest.mark.parametrize(
    ("pod_set", "resource", "words"),
    [
        (
            pods(1, 1, mem=2_097_152),
            "memory",
            "a pod needs 2 TiB of memory; the largest node its filters allow (n1) has 1 TiB of memory",
        ),
        (
            pods(1, 16),
            "nvidia.com/gpu",
            "a pod needs 16 GPUs; the largest node its filters allow (n1) has 8 GPUs",
        ),
        (
            pods(1, 0, extended={MIG: 8}),
            MIG,
            "a pod needs 8 mig-1g.10gb slices; the largest node its "
            "filters allow (n1) has 7 mig-1g.10gb slices",
        ),
        (
            pods(1, 1, gpu_milli=500, gpu_mem=100_000),
            "nvidia.com/gpumem",
            "a pod needs 100000 MiB of memory per "
            "GPU; the largest node its filters allow (n1) has 80 GiB of memory per GPU",
        ),
    ],
)
def test_every_resource_too_large_for_any_node_is_named_with_the_largest_nodes_figure(
    pod_set: object, resource: str, words: str
) -> None:
    wl = workload("big", pod_set)  # type: ignore[arg-type]
    small = node("n2", gpus=4, mem=524_288, extended={MIG: 3})
    snap = snapshot([node("n1", extended={MIG: 7}), small], [wl, workload("ok", pods(1, 1))])
    reason = first(snap, wl)
    assert reason.code == ReasonCode.POD_TOO_LARGE and reason.permanent
    assert reason.resource == resource
    assert reason.message == f"pod set main: {words}, so it can never fit"
    plan = planned(snap, "optimizer")
    assert [d.name for d in plan.admitted] == ["default/ok"]


def test_a_node_without_pod_slots_is_too_small_for_any_pod() -> None:
    wl = workload("job", pods(1, 1))
    full = node("n1").model_copy(update={"max_pods": 0})
    reason = first(snapshot([full], [wl]), wl)
    assert reason.code == ReasonCode.POD_TOO_LARGE and reason.resource == "pods"
    assert "has 0 pod slots" in reason.message


def test_the_largest_node_is_measured_among_those_the_filters_allow() -> None:
    big_cpu_but_tainted = node("big", cpu=512_000, taints=(Taint(key="x", effect="NoSchedule"),))
    wl = workload("job", pods(1, 1, cpu=200_000))
    reason = first(snapshot([big_cpu_but_tainted, node("n1")], [wl]), wl)
    assert "the largest node its filters allow (n1) has 128 CPUs" in reason.message
    tolerant = workload("job", pods(1, 1, cpu=200_000, tolerations=(Toleration(key="x", operator="Exists"),)))
    assert first(snapshot([big_cpu_but_tainted, node("n1")], [tolerant]), tolerant).code != (
        ReasonCode.POD_TOO_LARGE
    )


def test_a_big_enough_node_that_is_down_means_no_can_never_fit() -> None:
    down = node("big", cpu=512_000).model_copy(update={"ready": False})
    wl = workload("job", pods(1, 1, cpu=200_000))
    reason = first(snapshot([down, node("n1")], [wl]), wl)
    assert reason.code == ReasonCode.NO_MATCHING_NODE and not reason.permanent


def test_resources_that_fit_apart_but_never_together_still_can_never_fit() -> None:
    wide = node("wide", cpu=256_000, mem=65_536)
    deep = node("deep", cpu=16_000, mem=2_097_152)
    wl = workload("job", pods(1, 1, cpu=200_000, mem=1_048_576))
    reason = first(snapshot([wide, deep], [wl]), wl)
    assert reason.code == ReasonCode.POD_TOO_LARGE and reason.permanent
    assert "no node its filters allow has room for one pod at all" in reason.message
    assert reason.excluded == {"CPU allocatable too small": 1, "memory allocatable too small": 1}


def test_a_gang_the_cluster_can_never_hold_names_cpu_not_gpus() -> None:
    wl = workload("crowd", pods(10, 0, cpu=100_000))
    reason = first(snapshot([node("n1"), node("n2")], [wl]), wl)
    assert reason.code == ReasonCode.INSUFFICIENT_CAPACITY and reason.permanent
    assert reason.message == (
        "pod set main: needs 10 pods of 100 CPU and 4096 MiB; CPU is short: only 2 of 10 pods fit in the "
        "256 CPUs allocatable on eligible nodes (at most 128 on one node, 100 per pod), so it can never fit"
    )
    assert (reason.resource, reason.needed, reason.available, reason.unit) == ("cpu", 1000, 256, "cores")


# -- short right now ---------------------------------------------------------------------------------


def test_a_mig_slice_shortage_names_the_profile_not_cpu_and_memory() -> None:
    wl = workload("mig", pods(2, 0, extended={MIG: 3}))
    in_use = NodeUsage(extended={MIG: 5}, pods=5)
    snap = snapshot([node("a1", product=A100, extended={MIG: 7})], [wl], usage={"a1": in_use})
    reason = first(snap, wl)
    assert reason.message == (
        "pod set main: needs 6 mig-1g.10gb MIG slices (2 pods x 3); mig-1g.10gb MIG slices are short: "
        "only 0 of 2 pods fit in the 2 mig-1g.10gb slices free on eligible nodes (at most 2 on one node, "
        "3 per pod)"
    )
    assert reason.code == ReasonCode.INSUFFICIENT_CAPACITY and not reason.permanent
    assert (reason.resource, reason.needed, reason.available, reason.unit) == (MIG, 6, 2, "MIG slices")


def test_a_gpus_per_node_shortage_names_gpus_per_node() -> None:
    wl = workload("pair", pods(2, 4))
    two_used = NodeUsage(gpu_milli=(1000,) * 2 + (0,) * 6)
    six_used = NodeUsage(gpu_milli=(1000,) * 6 + (0,) * 2)
    snap = snapshot([node("n1"), node("n2")], [wl], usage={"n1": two_used, "n2": six_used})
    reason = first(snap, wl)
    assert reason.code == ReasonCode.GPUS_FRAGMENTED
    assert reason.message.endswith(
        "only 1 of 2 pods fit (8 GPUs free on eligible nodes, at most 6 on one node); "
        "too few GPUs per node: 1 node has 4 or more free"
    )
    assert "CPU, memory" not in reason.message


def test_a_cpu_shortage_on_gpu_nodes_names_cpu_with_figures() -> None:
    wl = workload("job", pods(2, 1, cpu=100_000))
    busy_cpu = NodeUsage(cpu_milli=100_000, pods=1)
    snap = snapshot([node("n1"), node("n2")], [wl], usage={"n1": busy_cpu, "n2": busy_cpu})
    reason = first(snap, wl)
    assert reason.message.endswith(
        "CPU is short: only 0 of 2 pods fit in the 56 CPUs free on eligible nodes "
        "(at most 28 on one node, 100 per pod)"
    )
    assert (reason.resource, reason.available, reason.unit) == ("cpu", 56, "cores")


def test_nvlink_islands_bind_where_gpu_pods_of_unknown_index_run() -> None:
    wl = workload("strict", pods(1, 2, nvlink_required=True))
    unknown = NodeUsage(unknown_index_gpus=1, pods=1)
    snap = snapshot([node("a1", islands=[[0, 1], [2, 3]], gpus=4)], [wl], usage={"a1": unknown})
    reason = first(snap, wl)
    assert reason.code == ReasonCode.NVLINK_REQUIRED
    assert "GPU pods of unknown index run on 1 node, so no island there can be promised" in reason.message


def test_a_required_level_no_eligible_node_carries_can_never_fit() -> None:
    wl = workload("gang", pods(2, 8, required_topology="example.com/pod"))
    reason = first(snapshot([node("n1"), node("n2")], [wl]), wl)
    assert reason.code == ReasonCode.TOPOLOGY_UNSATISFIABLE and reason.permanent
    assert reason.message.endswith("no eligible node has the label example.com/pod, so it can never fit")


def test_resources_free_in_total_but_on_different_nodes_are_named_together() -> None:
    wl = workload("job", pods(2, 0, cpu=64_000, mem=600_000))
    memory_left = NodeUsage(cpu_milli=100_000, pods=1)
    cpu_left = NodeUsage(memory_mib=1_600_000, pods=1)
    nodes = [node("n1", mem=2_097_152), node("n2", mem=2_097_152)]
    snap = snapshot(nodes, [wl], usage={"n1": memory_left, "n2": cpu_left})
    reason = first(snap, wl)
    assert reason.code == ReasonCode.INSUFFICIENT_CAPACITY and not reason.permanent
    assert reason.message.endswith(
        "only 0 of 2 pods fit: enough CPU, memory and pod slots are free in total, but not together on the "
        "same nodes"
    )
    crowded = first(snapshot(nodes, [wl], usage={"n1": cpu_left, "n2": cpu_left}), wl)
    assert "memory is short: only 0 of 2 pods fit in the 971 GiB free on eligible nodes" in crowded.message


def test_pod_sets_of_one_shape_keep_their_own_names_in_the_reason() -> None:
    first_wl = workload("a", pods(1, 16, name="trainer"))
    second_wl = workload("b", pods(1, 16, name="worker"))
    plan = planned(snapshot([node("n1")], [first_wl, second_wl]), "bestfit")
    messages = [d.reasons[0].message for d in plan.deferred]
    assert [m.split(":")[0] for m in messages] == ["pod set trainer", "pod set worker"]
