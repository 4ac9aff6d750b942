"""The ResourceSlice a simulated DRA node publishes: NVIDIA's DRA driver's format, and when it is written."""

from __future__ import annotations

from typing import Any

import pytest

from optsched.agent.devices import Discovery, GpuDevice
from optsched.agent.profile import resolve_profiles
from optsched.agent.resource_slices import (
    SliceAction,
    devices,
    is_dra_node,
    mebibytes,
    pci_bus_id,
    semver,
    slice_write,
)
from optsched.agent.simulated import SimulatedBackend, simulated_pcie_root, simulated_uuid


def h100_node() -> Discovery:
    (profile,) = resolve_profiles("dgx-h100")
    return SimulatedBackend(profile, "h1").discover()


def gpu(index: int, minor: int, **kw: Any) -> GpuDevice:
    fields: dict[str, Any] = {
        "index": index,
        "minor": minor,
        "uuid": f"GPU-{index}",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "product": "Tesla-T4",
        "memory_mib": 15360,
    }
    return GpuDevice(**{**fields, **kw})


def test_a_device_carries_the_drivers_attributes_and_memory_and_no_index() -> None:
    found = devices(h100_node(), set(), simulated_pcie_root)
    assert [d["name"] for d in found] == [f"gpu-{m}" for m in range(8)]
    assert found[1] == {
        "name": "gpu-1",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": simulated_uuid("h1", 1)},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.65.6"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:17:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"},
        },
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in found]
    assert roots[0] == roots[1] != roots[2] == roots[3], "GPUs pair up behind one PCIe root"


def test_devices_are_named_by_minor_number_and_unhealthy_or_mig_gpus_are_left_out() -> None:
    discovery = Discovery(
        gpus=(gpu(0, 3), gpu(1, 0), gpu(2, 1, mig_enabled=True), gpu(3, 2)), driver_version="550.90.07"
    )
    found = devices(discovery, {3})
    assert [(d["name"], d["attributes"]["uuid"]["string"]) for d in found] == [
        ("gpu-0", "GPU-1"),
        ("gpu-3", "GPU-0"),
    ]
    first = found[0]["attributes"]
    assert first["architecture"] == {"string": "Turing"}
    assert first["cudaDriverVersion"] == {"version": "12.4.0"}
    assert "resource.kubernetes.io/pcieRoot" not in first, "no root is made up where none is known"
    assert found[0]["capacity"]["memory"] == {"value": "15Gi"}


def test_an_unknown_product_and_driver_leave_their_attributes_out() -> None:
    discovery = Discovery(gpus=(gpu(0, 0, product="Mystery-X1"),), driver_version="r999-beta")
    attributes = devices(discovery, set())[0]["attributes"]
    assert "architecture" not in attributes and "driverVersion" not in attributes
    assert attributes["productName"] == {"string": "Mystery X1"}


@pytest.mark.parametrize(
    ("given", "want"),
    [("580.65.06", "580.65.6"), ("535.104", "535.104.0"), ("v580", None), ("1.2.3.4", None)],
)
def test_driver_versions_become_semantic_versions(given: str, want: str | None) -> None:
    assert semver(given) == want


def test_bus_ids_and_memory_take_kubernetes_forms() -> None:
    assert pci_bus_id("00000000:1A:00.0") == "0000:1a:00.0"
    assert pci_bus_id("garbage") == "garbage"
    assert [mebibytes(m) for m in (81559, 40960, 1048576)] == ["81559Mi", "40Gi", "1Ti"]


def test_a_new_slice_is_one_pool_named_after_the_node_and_owned_by_it() -> None:
    wanted = devices(h100_node(), set())
    write = slice_write("h1", "uid-1", None, wanted)
    assert write.action is SliceAction.CREATE and write.body is not None
    assert write.body["metadata"] == {
        "name": "h1-gpu.nvidia.com",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "h1", "uid": "uid-1", "controller": True}
        ],
    }
    assert write.body["apiVersion"] == "resource.k8s.io/v1" and write.body["kind"] == "ResourceSlice"
    spec = write.body["spec"]
    assert spec["driver"] == "gpu.nvidia.com" and spec["nodeName"] == "h1"
    assert spec["pool"] == {"name": "h1", "generation": 1, "resourceSliceCount": 1}
    assert spec["devices"] == wanted


def published(devices_: list[dict[str, Any]], generation: int = 4, uid: str = "uid-1") -> dict[str, Any]:
    return {
        "metadata": {"name": "h1-gpu.nvidia.com", "resourceVersion": "77", "ownerReferences": [{"uid": uid}]},
        "spec": {"pool": {"name": "h1", "generation": generation}, "devices": devices_},
    }


def test_an_unchanged_slice_is_not_written_even_where_the_server_wrote_memory_differently() -> None:
    discovery = Discovery(gpus=(gpu(0, 0), gpu(1, 1)), driver_version="580.65.06")
    wanted = devices(discovery, set())
    as_stored = [{**d, "capacity": {"memory": {"value": "15360Mi"}}} for d in wanted]
    assert slice_write("h1", "uid-1", published(as_stored), wanted).action is SliceAction.NONE


def test_a_changed_slice_is_patched_with_the_next_generation_on_the_read_version() -> None:
    discovery = Discovery(gpus=(gpu(0, 0), gpu(1, 1)), driver_version="580.65.06")
    before = devices(discovery, set())
    after = devices(discovery, {1})
    write = slice_write("h1", "uid-1", published(before), after)
    assert write.action is SliceAction.UPDATE and write.body is not None
    assert write.body["spec"]["pool"]["generation"] == 5
    assert write.body["spec"]["devices"] == after and len(after) == 1
    assert write.body["metadata"]["resourceVersion"] == "77"
    assert "name" not in write.body["metadata"] and "kind" not in write.body


def test_a_slice_of_a_recreated_node_is_taken_over() -> None:
    wanted = devices(Discovery(gpus=(gpu(0, 0),)), set())
    write = slice_write("h1", "uid-new", published(wanted, uid="uid-old"), wanted)
    assert write.action is SliceAction.UPDATE and write.body is not None
    assert write.body["metadata"]["ownerReferences"][0]["uid"] == "uid-new"


def test_a_node_that_is_no_dra_node_loses_its_slice() -> None:
    wanted = devices(Discovery(gpus=(gpu(0, 0),)), set())
    assert slice_write("h1", "u", published(wanted), None).action is SliceAction.DELETE
    assert slice_write("h1", "u", None, None).action is SliceAction.NONE


def test_only_nodes_labelled_as_simulated_dra_nodes_are_dra_nodes() -> None:
    assert is_dra_node({"metadata": {"labels": {"optsched.io/simulated-dra": "true"}}})
    assert not is_dra_node({"metadata": {"labels": {"optsched.io/simulated-dra": "no"}}})
    assert not is_dra_node({"metadata": {}})
