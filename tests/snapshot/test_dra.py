"""DRA nodes in a snapshot: GPUs from NVIDIA's ResourceSlices, usage from claims, demand from templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optsched.model.snapshot import AssumedPod, GpuMode, Node, PodRequest, Snapshot
from optsched.snapshot.build import load_snapshot, snapshot_from_objects
from optsched.snapshot.documents import dump_objects
from optsched.snapshot.dra import Unreadable, allocated, dra_nodes, unavailable
from tests.snapshot.dra_raw import (
    claim_template,
    device,
    dra_node,
    resource_claim,
    resource_slice,
    with_template_claim,
)
from tests.snapshot.raw import cluster_queue, node, node_gpus, pod, queue_objects, uuid, workload


def only(snap: Snapshot, name: str = "n1") -> Node:
    found = snap.node(name)
    assert found is not None
    return found


def test_a_slice_gives_devices_by_minor_with_gfd_product_memory_and_pci_bus_id() -> None:
    devices = [device(3, "GPU-c"), device(1, "GPU-a", product="NVIDIA A100-SXM4-40GB", memory="40Gi")]
    nodes = dra_nodes([resource_slice("n1", devices)])
    first, second = nodes["n1"].devices
    assert (first.name, first.uuid, first.minor) == ("gpu-1", "GPU-a", 1)
    assert (first.product, first.memory_mib, first.pci_bus_id) == (
        "NVIDIA-A100-SXM4-40GB",
        40960,
        "0000:19:00.0",
    )
    assert second.name == "gpu-3" and nodes["n1"].pool == "n1"


def test_slices_of_another_driver_or_an_older_generation_do_not_count() -> None:
    old = resource_slice("n1", [device(0, "GPU-old")], generation=1, name="old")
    new = resource_slice("n1", [device(0, "GPU-new")], generation=2, name="new")
    other = resource_slice("n2", driver="example.com/nic")
    nodes = dra_nodes([old, new, other])
    assert list(nodes) == ["n1"] and [d.uuid for d in nodes["n1"].devices] == ["GPU-new"]


def test_an_incomplete_pool_plans_no_gpu() -> None:
    nodes = dra_nodes([resource_slice("n1", slice_count=2)])
    assert nodes["n1"].devices == () and "incomplete" in nodes["n1"].problem


def test_a_mig_device_is_not_a_whole_gpu() -> None:
    devices = [device(0, "GPU-a"), device(1, "MIG-b", kind="mig")]
    assert [d.uuid for d in dra_nodes([resource_slice("n1", devices)])["n1"].devices] == ["GPU-a"]


def test_a_dra_node_without_agent_topology_numbers_devices_by_minor_without_nvlink() -> None:
    devices = [device(m, f"GPU-{m}") for m in (2, 0, 1)]
    n1 = only(snapshot_from_objects([dra_node("n1"), resource_slice("n1", devices)]))
    assert n1.gpu_mode == GpuMode.DRA and n1.gpu_count == 3
    assert n1.gpu_uuids == ("GPU-0", "GPU-1", "GPU-2")
    assert n1.nvlink_islands == ((0,), (1,), (2,)) and n1.unhealthy_gpus == frozenset()
    assert (n1.product, n1.gpu_memory_mib) == ("NVIDIA-H100-80GB-HBM3", 81559)


def test_a_node_without_a_slice_stays_a_device_plugin_node() -> None:
    n1 = only(snapshot_from_objects([node("n1"), resource_slice("n2")]))
    assert n1.gpu_mode == GpuMode.DEVICE_PLUGIN and n1.gpu_count == 8 and n1.gpu_uuids == ()


def test_the_agents_index_island_and_health_are_joined_by_uuid() -> None:
    # Minor numbers run opposite to the agent's indices; the driver left GPU 5 (unhealthy) out.
    devices = [device(7 - i, uuid("n1", i)) for i in range(8) if i != 5]
    agent = node_gpus("n1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]])
    n1 = only(snapshot_from_objects([dra_node("n1"), resource_slice("n1", devices), agent]))
    assert n1.gpu_uuids == tuple(uuid("n1", i) for i in range(8))
    assert n1.nvlink_islands == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert n1.unhealthy_gpus == frozenset({5}) and n1.numa == (0, 0, 0, 0, 1, 1, 1, 1)


def test_a_slice_device_the_agent_does_not_know_comes_after_its_gpus_alone() -> None:
    devices = [device(i, uuid("n1", i)) for i in range(2)] + [device(9, "GPU-new")]
    agent = node_gpus("n1", gpus=2)
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1", devices), agent])
    n1 = only(snap)
    assert n1.gpu_uuids == (uuid("n1", 0), uuid("n1", 1), "GPU-new") and n1.nvlink_islands[-1] == (2,)
    assert any("GPU-new" in w and "does not report" in w for w in snap.warnings)


def test_a_malformed_slice_is_left_out_naming_the_field_and_its_node_plans_no_gpu() -> None:
    broken = resource_slice("n1")
    del broken["spec"]["devices"][2]["attributes"]["uuid"]
    snap = snapshot_from_objects([dra_node("n1"), broken], source="dump.yaml")
    (left_out,) = snap.left_out
    assert left_out.kind == "ResourceSlice"
    assert left_out.message.startswith("dump.yaml: ResourceSlice n1-gpu.nvidia.com: field spec.devices[2]")
    n1 = only(snap)
    assert n1.gpu_mode == GpuMode.DRA and n1.gpu_count == 0
    assert any("none of its GPUs are planned" in w for w in snap.warnings)


def test_usage_comes_from_claim_allocations_not_from_pod_requests() -> None:
    devices = [device(7 - i, uuid("n1", i)) for i in range(8)]
    claim = resource_claim("runner-gpus", "n1", "gpu-7", "gpu-6")  # indices 0 and 1
    bound = pod("runner", "n1", gpus=4)  # served through the extended resource: its claim is the truth
    snap = snapshot_from_objects(
        [dra_node("n1"), resource_slice("n1", devices), node_gpus("n1"), claim, bound]
    )
    usage = snap.usage_of("n1")
    assert usage.gpu_milli == (1000, 1000, 0, 0, 0, 0, 0, 0)
    assert usage.unknown_index_gpus == 0 and usage.pods == 1


def test_claims_of_another_driver_or_without_allocation_hold_nothing() -> None:
    claims = [resource_claim("pending", None), resource_claim("nic", "n1", "gpu-0", driver="example.com/nic")]
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1"), *claims])
    assert sum(snap.usage_of("n1").gpu_milli) == 0


def test_a_malformed_claim_is_left_out_with_a_warning() -> None:
    claim = resource_claim("bad", "n1", "gpu-0")
    del claim["status"]["allocation"]["devices"]["results"][0]["pool"]
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1"), claim], source="dump.yaml")
    (left_out,) = snap.left_out
    assert "field status.allocation.devices.results[0].pool: is required but missing" in left_out.message
    assert any("may be planned again" in w for w in snap.warnings)


def test_a_claim_whose_metadata_is_not_a_mapping_still_holds_its_devices() -> None:
    claim = resource_claim("odd", "n1", "gpu-0")
    claim["metadata"] = "not a mapping"
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1"), claim])
    assert sum(snap.usage_of("n1").gpu_milli) == 1000


def test_an_assumed_pod_whose_planned_gpus_a_claim_holds_is_not_counted_twice() -> None:
    claim = resource_claim("w-0", "n1", "gpu-0", "gpu-1")
    assumed = AssumedPod(workload="ml/w", node="n1", request=PodRequest(gpus=3), gpus=(0, 1, 2))
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1"), claim], assumed=[assumed])
    assert snap.usage_of("n1").gpu_milli[:4] == (1000, 1000, 1000, 0)


def test_an_assumed_pod_asking_through_a_template_still_holds_its_planned_gpus() -> None:
    assumed = AssumedPod(workload="ml/w", node="n1", request=PodRequest(gpus=0), gpus=(4, 5))
    snap = snapshot_from_objects([dra_node("n1"), resource_slice("n1")], assumed=[assumed])
    assert snap.usage_of("n1").gpu_milli[4:6] == (1000, 1000)


def _queue(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [dra_node("n1"), resource_slice("n1"), cluster_queue(gpus=16), *queue_objects(), *extra]


def test_a_pod_asking_through_a_claim_template_needs_its_gpus() -> None:
    wl = with_template_claim(workload("w", gpus=0), "pair")
    snap = snapshot_from_objects(_queue(wl, claim_template("pair", 2)))
    (pending,) = snap.workloads
    assert pending.pod_sets[0].request.gpus == 2 and not pending.pod_sets[0].request.is_share


def test_a_missing_template_leaves_the_workload_out_with_the_reason() -> None:
    wl = with_template_claim(workload("w", gpus=0), "gone")
    snap = snapshot_from_objects(_queue(wl, claim_template("gone", namespace="other")), source="dump.yaml")
    assert snap.workloads == ()
    (left_out,) = snap.left_out
    assert (
        left_out.kind == "Workload"
        and "names ResourceClaimTemplate ml/gone, which is not in the input" in (left_out.message)
    )
    assert "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName" in left_out.message


def test_a_template_the_planner_cannot_count_is_left_out_and_so_are_its_workloads() -> None:
    wl = with_template_claim(workload("w", gpus=0), "all")
    snap = snapshot_from_objects(_queue(wl, claim_template("all", None, allocationMode="All")))
    kinds = sorted(item.kind for item in snap.left_out)
    assert kinds == ["ResourceClaimTemplate", "Workload"] and snap.workloads == ()
    template = next(item for item in snap.left_out if item.kind == "ResourceClaimTemplate")
    assert (
        "field spec.spec.devices.requests[0].exactly.allocationMode: expected ExactCount" in template.message
    )


def test_a_template_of_another_device_class_takes_no_gpu() -> None:
    wl = with_template_claim(workload("w", gpus=0), "nic")
    snap = snapshot_from_objects(_queue(wl, claim_template("nic", 1, device_class="nic.example.com")))
    assert snap.workloads[0].pod_sets[0].request.gpus == 0


def test_unavailable_names_uuids_gone_or_held_by_another_claim() -> None:
    objects = [
        resource_slice("n1"),
        resource_claim("other", "n1", "gpu-1"),
        resource_claim("mine", "n1", "gpu-2"),
    ]
    nodes = dra_nodes(objects)
    in_use = allocated(objects, nodes)
    assert in_use["n1"]["gpu-1"].claim == "ml/other" and in_use["n1"]["gpu-1"].uuid == uuid("n1", 1)
    wanted = [uuid("n1", 0), uuid("n1", 1), uuid("n1", 2), "GPU-gone"]
    problems = unavailable(wanted, node="n1", nodes=nodes, in_use=in_use, claim="ml/mine")
    assert sorted(problems) == sorted([uuid("n1", 1), "GPU-gone"])
    assert "ResourceClaim ml/other" in problems[uuid("n1", 1)] and "not published" in problems["GPU-gone"]


def test_collecting_functions_report_what_they_leave_out() -> None:
    broken = resource_slice("n1")
    broken["spec"]["pool"]["generation"] = "two"
    problems: list[Unreadable] = []
    assert dra_nodes([broken], problems)["n1"].devices == ()
    (problem,) = problems
    assert problem.error.field == "spec.pool.generation"


def test_a_snapshot_file_carries_dra_objects_and_an_older_version_is_left_out(tmp_path: Path) -> None:
    older = resource_slice("n2", api="resource.k8s.io/v1beta1")
    path = tmp_path / "dump.yaml"
    dump_objects([dra_node("n1"), resource_slice("n1"), dra_node("n2"), older], path)
    snap = load_snapshot(path)
    assert only(snap).gpu_mode == GpuMode.DRA and only(snap).gpu_count == 8
    assert only(snap, "n2").gpu_mode == GpuMode.DEVICE_PLUGIN
    (left_out,) = snap.left_out
    assert "apiVersion 'resource.k8s.io/v1beta1' is not read" in left_out.message
