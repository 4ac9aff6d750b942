"""The ResourceSlice a simulated DRA node publishes, in the format of NVIDIA's DRA driver: pure values.

On a real node NVIDIA's DRA driver (``gpu.nvidia.com``) publishes one pool per
node, one ResourceSlice, and kube-scheduler's DRA allocator hands its devices
out. A simulated (KWOK) node has no driver, so the simulated agent plays it for
the nodes labelled :data:`SIMULATED_DRA_LABEL`: the same driver, pool, device
names (``gpu-<minor>``), attributes and memory capacity. Unhealthy GPUs are left
out, as the driver leaves them out, and every change of the devices bumps
``pool.generation``. :func:`slice_write` decides what to send given the slice the
cluster holds; the agent's runner only carries the decision out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from optsched.agent.devices import Discovery, GpuDevice
from optsched.model.names import DRA_GPU_DRIVER, DRA_UUID_ATTRIBUTE, RESOURCE_API

SIMULATED_DRA_LABEL = "optsched.io/simulated-dra"
"""On a simulated node: ``"true"`` makes the simulated agent publish its GPUs as a ResourceSlice
(the node then has no ``nvidia.com/gpu`` capacity: DRA hands its GPUs out, not a device plugin)."""
RESOURCE_SLICES = "resourceslices"
PCI_BUS_ID_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"

_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "GB200": ("Blackwell", "10.0.0"),
    "B200": ("Blackwell", "10.0.0"),
    "H200": ("Hopper", "9.0.0"),
    "H100": ("Hopper", "9.0.0"),
    "A100": ("Ampere", "8.0.0"),
    "A30": ("Ampere", "8.0.0"),
    "A40": ("Ampere", "8.6.0"),
    "A10": ("Ampere", "8.6.0"),
    "L40S": ("Ada Lovelace", "8.9.0"),
    "L40": ("Ada Lovelace", "8.9.0"),
    "L4": ("Ada Lovelace", "8.9.0"),
    "T4": ("Turing", "7.5.0"),
    "V100": ("Volta", "7.0.0"),
}
"""GPU model (a dash-separated word of GFD's product name) -> architecture and CUDA compute capability."""
_CUDA_OF_DRIVER: dict[int, str] = {
    580: "13.0.0",
    575: "12.9.0",
    570: "12.8.0",
    565: "12.7.0",
    560: "12.6.0",
    555: "12.5.0",
    550: "12.4.0",
    535: "12.2.0",
}
"""Driver branch -> the CUDA version its driver API reports."""


class SliceAction(StrEnum):
    NONE = "none"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class SliceWrite:
    """What to do with a node's ResourceSlice: the object to create or the merge patch to send."""

    action: SliceAction
    name: str
    body: dict[str, Any] | None = None


def is_dra_node(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return str(labels.get(SIMULATED_DRA_LABEL, "")).lower() == "true"


def slice_name(node: str) -> str:
    return f"{node}-{DRA_GPU_DRIVER}"


def nvml_name(product: str) -> str:
    """NVML's product name (``NVIDIA H100 80GB HBM3``) from GFD's (``NVIDIA-H100-80GB-HBM3``)."""
    return product.replace("-", " ")


def semver(version: str) -> str | None:
    """A driver version (``580.65.06``) as a semantic version (``580.65.6``); None if it is not one."""
    parts = version.strip().split(".")
    if not parts or len(parts) > 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(str(n) for n in numbers)


def pci_bus_id(nvml_bus_id: str) -> str:
    """Kubernetes' form of a PCI address (``0000:18:00.0``) from NVML's (``00000000:18:00.0``)."""
    parts = nvml_bus_id.lower().split(":")
    if len(parts) != 3 or not all(c in "0123456789abcdef" for c in parts[0]) or not parts[0]:
        return nvml_bus_id.lower()
    return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"


def mebibytes(mib: int) -> str:
    """A memory size in its canonical Kubernetes quantity form (the API server keeps that form)."""
    for suffix in ("Ti", "Gi"):
        unit = 1024 ** (2 if suffix == "Ti" else 1)
        if mib % unit == 0:
            return f"{mib // unit}{suffix}"
    return f"{mib}Mi"


def _model(product: str) -> tuple[str, str] | None:
    for word in product.upper().split("-"):
        if word in _ARCHITECTURES:
            return _ARCHITECTURES[word]
    return None


def device(gpu: GpuDevice, driver_version: str, pcie_root: str | None = None) -> dict[str, Any]:
    """One whole GPU as NVIDIA's driver publishes it (named by minor number: there is no index)."""
    attributes: dict[str, Any] = {
        "type": {"string": "gpu"},
        DRA_UUID_ATTRIBUTE: {"string": gpu.uuid},
        "productName": {"string": nvml_name(gpu.product)},
        "brand": {"string": "Nvidia"},
    }
    model = _model(gpu.product)
    if model is not None:
        attributes["architecture"] = {"string": model[0]}
        attributes["cudaComputeCapability"] = {"version": model[1]}
    driver = semver(driver_version)
    if driver is not None:
        attributes["driverVersion"] = {"version": driver}
        cuda = _CUDA_OF_DRIVER.get(int(driver.split(".")[0]))
        if cuda is not None:
            attributes["cudaDriverVersion"] = {"version": cuda}
    attributes[PCI_BUS_ID_ATTRIBUTE] = {"string": pci_bus_id(gpu.pci_bus_id)}
    if pcie_root:
        attributes[PCIE_ROOT_ATTRIBUTE] = {"string": pcie_root}
    return {
        "name": f"gpu-{gpu.minor}",
        "attributes": attributes,
        "capacity": {"memory": {"value": mebibytes(gpu.memory_mib)}},
    }


def devices(
    discovery: Discovery, unhealthy: Collection[int], pcie_root: Callable[[int], str] | None = None
) -> list[dict[str, Any]]:
    """The slice's devices: every healthy whole GPU (MIG-enabled GPUs are not whole GPUs), by minor.

    ``pcie_root`` gives a GPU index's PCIe root complex, where it is known.
    """
    gpus = sorted(
        (g for g in discovery.gpus if g.index not in unhealthy and not g.mig_enabled), key=lambda g: g.minor
    )
    root = pcie_root or (lambda _index: "")
    return [device(g, discovery.driver_version, root(g.index)) for g in gpus]


def resource_slice(
    node: str, node_uid: str, found: Sequence[Mapping[str, Any]], generation: int
) -> dict[str, Any]:
    """The whole ResourceSlice object of ``node``: one pool named after the node, one slice in it."""
    metadata: dict[str, Any] = {"name": slice_name(node)}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRA_GPU_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [dict(d) for d in found],
        },
    }


def _quantity_mib(text: str) -> float | None:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1024.0**2}
    for suffix, factor in units.items():
        if text.endswith(suffix) and text[: -len(suffix)].isascii() and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return None


def _comparable(value: Any) -> Any:
    """A device list with memory quantities as numbers, so ``16Gi`` and ``16384Mi`` compare equal."""
    if isinstance(value, dict):
        out = {k: _comparable(v) for k, v in value.items()}
        if set(out) == {"value"} and isinstance(value["value"], str):
            mib = _quantity_mib(value["value"])
            return {"value": mib} if mib is not None else out
        return out
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def slice_write(
    node: str,
    node_uid: str,
    current: Mapping[str, Any] | None,
    wanted: Sequence[Mapping[str, Any]] | None,
) -> SliceWrite:
    """What brings the cluster's slice of ``node`` to ``wanted`` devices (None: the node has no slice).

    Nothing is written while the devices and the node's ownership are as wanted;
    a change is a merge patch carrying the read ``resourceVersion`` (a concurrent
    writer makes it fail and the next pass decides again) and the next generation.
    """
    name = slice_name(node)
    if wanted is None:
        return SliceWrite(SliceAction.DELETE if current is not None else SliceAction.NONE, name)
    if current is None:
        return SliceWrite(SliceAction.CREATE, name, resource_slice(node, node_uid, wanted, 1))
    spec = current.get("spec") or {}
    meta = current.get("metadata") or {}
    owned = not node_uid or any(o.get("uid") == node_uid for o in meta.get("ownerReferences") or [])
    if owned and _comparable(list(spec.get("devices") or [])) == _comparable([dict(d) for d in wanted]):
        return SliceWrite(SliceAction.NONE, name)
    generation = int((spec.get("pool") or {}).get("generation") or 0) + 1
    body = resource_slice(node, node_uid, wanted, generation)
    del body["apiVersion"], body["kind"]
    body["metadata"]["resourceVersion"] = str(meta.get("resourceVersion", ""))
    del body["metadata"]["name"]
    if not body["metadata"]["resourceVersion"]:
        del body["metadata"]["resourceVersion"]
    return SliceWrite(SliceAction.UPDATE, name, body)
