"""DRA objects as a dump holds them: NVIDIA's ResourceSlices, ResourceClaims and ResourceClaimTemplates."""

from __future__ import annotations

from typing import Any

from tests.snapshot.raw import node, uuid

RESOURCE = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"


def dra_node(name: str) -> dict[str, Any]:
    """A node NVIDIA's DRA driver serves: no ``nvidia.com/gpu`` in its allocatable."""
    obj = node(name)
    del obj["status"]["allocatable"]["nvidia.com/gpu"]
    return obj


def device(
    minor: int,
    device_uuid: str,
    *,
    product: str = "NVIDIA H100 80GB HBM3",
    memory: str = "81559Mi",
    kind: str = "gpu",
) -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": kind},
            "uuid": {"string": device_uuid},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + minor:02x}:00.0"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def resource_slice(
    node_name: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    generation: int = 1,
    slice_count: int = 1,
    name: str | None = None,
    driver: str = DRIVER,
    api: str = RESOURCE,
) -> dict[str, Any]:
    """The slice of ``node_name``; by default 8 GPUs ``gpu-0..7`` with the UUIDs of :func:`uuid`."""
    listed = devices if devices is not None else [device(i, uuid(node_name, i)) for i in range(8)]
    return {
        "apiVersion": api,
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name}-gpu.nvidia.com"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": slice_count},
            "devices": listed,
        },
    }


def resource_claim(
    name: str, node_name: str | None, *devices: str, namespace: str = "ml", driver: str = DRIVER
) -> dict[str, Any]:
    """A claim; with ``node_name``, allocated those device names of that node's pool."""
    obj: dict[str, Any] = {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpus-0", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {},
    }
    if node_name is not None:
        results = [{"request": "gpus-0", "driver": driver, "pool": node_name, "device": d} for d in devices]
        obj["status"]["allocation"] = {"devices": {"results": results}}
    return obj


def claim_template(
    name: str, count: int | None = 2, *, namespace: str = "ml", device_class: str = DRIVER, **exactly: Any
) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class, **exactly}
    if count is not None:
        request["count"] = count
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}},
    }


def with_template_claim(workload: dict[str, Any], template: str) -> dict[str, Any]:
    """``workload``'s pods ask for GPUs through ``template`` instead of ``nvidia.com/gpu``."""
    spec = workload["spec"]["podSets"][0]["template"]["spec"]
    container = spec["containers"][0]
    container["resources"]["requests"].pop("nvidia.com/gpu", None)
    container["resources"]["claims"] = [{"name": "gpus"}]
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    return workload
