"""The GPUs NVIDIA's DRA driver publishes per node, and the devices ResourceClaims hold on them.

On a node where NVIDIA's DRA driver runs there is no device plugin: the node's
GPUs are the devices of its ``gpu.nvidia.com`` ResourceSlices (one pool per
node, devices named ``gpu-<minor>``, each with its ``uuid``, ``productName``,
PCI bus id and ``memory`` capacity), and a GPU is in use when any
ResourceClaim's ``status.allocation`` names it by (driver, pool, device). This
module reads both, purely, for the snapshot builder and for the controller,
which asks here whether a planned UUID is still published and free
(:func:`unavailable`).

Pools follow Kubernetes' rules: only the slices of a pool's newest generation
count, and a pool with fewer of them than its ``resourceSliceCount`` is
incomplete (its devices are not planned until it is whole). A device whose
``type`` is not ``gpu`` (a MIG slice) is not a whole GPU and is left out.

A slice or claim that cannot be read is an :class:`~optsched.errors.InputError`
naming the object and field; the collecting functions leave it out and record
it in ``problems`` (:class:`Unreadable`), so one bad object never sinks a plan.
A node whose slice cannot be read stays a DRA node with no GPU planned
(:attr:`DraNode.problem` says why), never a device-plugin node by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.model.names import DRA_GPU_DRIVER, DRA_UUID_ATTRIBUTE, RESOURCE_GROUP
from optsched.snapshot.fields import (
    as_map,
    as_str,
    describe,
    get_int,
    get_map,
    get_str,
    mappings,
    object_name,
    object_namespace,
)
from optsched.snapshot.quantity import memory_mib
from optsched.topology.gpu_topology import MAX_ID_CHARS

__all__ = [
    "DRA_VERSIONS",
    "DraDevice",
    "DraNode",
    "DraSlice",
    "InUse",
    "Unreadable",
    "allocated",
    "allocation_results",
    "dra_nodes",
    "gfd_product",
    "read_allocation",
    "read_slice",
    "unavailable",
]

DRA_VERSIONS = ("v1", "v1beta2")
"""The ``resource.k8s.io`` versions read: the same device, claim and template fields in both."""
PCI_BUS_ID_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
PRODUCT_ATTRIBUTE = "productName"
TYPE_ATTRIBUTE = "type"
MEMORY_CAPACITY = "memory"
_MINOR = re.compile(r"^gpu-(\d{1,6})$")


@dataclass(frozen=True)
class DraDevice:
    """One whole GPU of a ResourceSlice."""

    name: str
    """The slice's device name (``gpu-<minor>``): what a claim's allocation names."""
    uuid: str
    product: str = ""
    """``productName`` in GFD's form (spaces as dashes), as ``nvidia.com/gpu.product`` has it."""
    memory_mib: int = 0
    pci_bus_id: str = ""
    minor: int | None = None
    """The number in ``gpu-<minor>``; None for a device named otherwise."""


@dataclass(frozen=True)
class DraNode:
    """The GPUs NVIDIA's DRA driver publishes for one node."""

    node: str
    pool: str
    generation: int = 0
    devices: tuple[DraDevice, ...] = ()
    """Whole GPUs, by minor number (devices named otherwise last, by name)."""
    problem: str = ""
    """Why no GPU of the node is planned (a slice that cannot be read, an incomplete pool); "" if none."""

    def device(self, name: str) -> DraDevice | None:
        return next((d for d in self.devices if d.name == name), None)

    def by_uuid(self, uuid: str) -> DraDevice | None:
        return next((d for d in self.devices if d.uuid == uuid), None)


@dataclass(frozen=True)
class InUse:
    """A device some ResourceClaim's allocation holds."""

    claim: str
    """``namespace/name`` of the claim."""
    device: str
    uuid: str = ""
    """The device's UUID where its node's slice still publishes it."""


@dataclass(frozen=True)
class Unreadable:
    """An object left out because it cannot be read; ``error`` names its field."""

    obj: dict[str, Any]
    error: InputError


@dataclass(frozen=True)
class DraSlice:
    """One readable ``gpu.nvidia.com`` ResourceSlice of one node."""

    node: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[DraDevice, ...]


def gfd_product(product_name: str) -> str:
    """NVML's product name as GPU Feature Discovery labels it: ``NVIDIA H100 80GB HBM3`` -> dashes."""
    return "-".join(product_name.split())


def is_dra_kind(obj: Mapping[str, Any]) -> bool:
    """The object is of the ``resource.k8s.io`` group (any version)."""
    return str(obj.get("apiVersion", "")).split("/")[0] == RESOURCE_GROUP


def _attribute(attributes: dict[str, Any], name: str, *, obj: dict[str, Any], field: str) -> str:
    """A string attribute, by its short or driver-qualified name; "" where absent."""
    key = name if name in attributes else f"{DRA_GPU_DRIVER}/{name}"
    where = f"{field}.attributes[{key}]"
    value = as_map(attributes.get(key), obj=obj, field=where)
    text = as_str(value.get("string"), obj=obj, field=f"{where}.string")
    if len(text) > MAX_ID_CHARS * 2:
        raise InputError(f"expected at most {MAX_ID_CHARS * 2} characters", obj=describe(obj), field=where)
    return text


def _device(entry: dict[str, Any], *, obj: dict[str, Any], where: str) -> DraDevice | None:
    """A whole GPU; None for a device of another type (a MIG slice)."""
    name = as_str(entry.get("name"), obj=obj, field=f"{where}.name")
    if not name:
        raise InputError("is required but missing", obj=describe(obj), field=f"{where}.name")
    attributes = as_map(entry.get("attributes"), obj=obj, field=f"{where}.attributes")
    kind = _attribute(attributes, TYPE_ATTRIBUTE, obj=obj, field=where)
    if kind and kind != "gpu":
        return None
    uuid = _attribute(attributes, DRA_UUID_ATTRIBUTE, obj=obj, field=where)
    if not uuid or len(uuid) > MAX_ID_CHARS:
        raise InputError(
            f"expected a GPU UUID of 1..{MAX_ID_CHARS} characters",
            obj=describe(obj),
            field=f"{where}.attributes[{DRA_UUID_ATTRIBUTE}].string",
        )
    capacity = as_map(entry.get("capacity"), obj=obj, field=f"{where}.capacity")
    memory = as_map(capacity.get(MEMORY_CAPACITY), obj=obj, field=f"{where}.capacity.memory")
    mib = 0
    if memory.get("value") is not None:
        try:
            mib = memory_mib(memory["value"], round_up=False)
        except InputError as exc:
            raise InputError(exc.detail, obj=describe(obj), field=f"{where}.capacity.memory.value") from None
    minor = _MINOR.match(name)
    return DraDevice(
        name=name,
        uuid=uuid,
        product=gfd_product(_attribute(attributes, PRODUCT_ATTRIBUTE, obj=obj, field=where)),
        memory_mib=mib,
        pci_bus_id=_attribute(attributes, PCI_BUS_ID_ATTRIBUTE, obj=obj, field=where),
        minor=int(minor.group(1)) if minor else None,
    )


def _whole_number(obj: dict[str, Any], path: str, *, default: int, least: int) -> int:
    value = get_int(obj, path, default=default)
    if value is None or value < least:
        raise InputError(f"expected a whole number >= {least}, got {value!r}", obj=describe(obj), field=path)
    return value


def read_slice(obj: dict[str, Any]) -> DraSlice | None:
    """A ``gpu.nvidia.com`` ResourceSlice of one node; None for another driver or a slice of no node."""
    if get_str(obj, "spec.driver") != DRA_GPU_DRIVER:
        return None
    node = get_str(obj, "spec.nodeName")
    if not node:
        return None
    pool = get_str(obj, "spec.pool.name", required=True)
    devices: list[DraDevice] = []
    seen: dict[str, str] = {}
    for where, entry in mappings(get_map(obj, "spec").get("devices"), obj=obj, field="spec.devices"):
        device = _device(entry, obj=obj, where=where)
        if device is None:
            continue
        for key, what in ((device.name, "name"), (device.uuid, "UUID")):
            if key in seen:
                raise InputError(
                    f"{what} {key!r} is also {seen[key]}'s",
                    obj=describe(obj),
                    field=f"{where}.{what.lower()}",
                )
            seen[key] = where
        devices.append(device)
    return DraSlice(
        node=node,
        pool=pool,
        generation=_whole_number(obj, "spec.pool.generation", default=0, least=0),
        slice_count=_whole_number(obj, "spec.pool.resourceSliceCount", default=1, least=1),
        devices=tuple(devices),
    )


def _by_minor(device: DraDevice) -> tuple[int, int, str]:
    return (device.minor is None, device.minor or 0, device.name)


def _pool_node(node: str, slices: list[DraSlice]) -> DraNode:
    """A node's pool from its newest generation of slices (incomplete: no device planned)."""
    pool = slices[0].pool
    generation = max(s.generation for s in slices)
    newest = [s for s in slices if s.generation == generation]
    expected = max(s.slice_count for s in newest)
    if len(newest) < expected:
        problem = (
            f"pool {pool} is incomplete ({len(newest)} of {expected} ResourceSlices "
            f"of generation {generation})"
        )
        return DraNode(node, pool, generation, problem=problem)
    devices = sorted((d for s in newest for d in s.devices), key=_by_minor)
    uuids = [d.uuid for d in devices]
    if len(set(uuids)) != len(uuids) or len({d.name for d in devices}) != len(devices):
        return DraNode(node, pool, generation, problem=f"pool {pool} lists a device name or UUID twice")
    return DraNode(node, pool, generation, tuple(devices))


def dra_nodes(
    objects: Iterable[dict[str, Any]], problems: list[Unreadable] | None = None
) -> dict[str, DraNode]:
    """Per node name, the GPUs of its ``gpu.nvidia.com`` ResourceSlices (other objects are ignored).

    A slice that cannot be read goes to ``problems``; its node (where its
    ``spec.nodeName`` reads) is still a DRA node, with no GPU and a problem.
    """
    pools: dict[str, list[DraSlice]] = {}
    broken: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") != "ResourceSlice" or not is_dra_kind(obj):
            continue
        try:
            found = read_slice(obj)
        except InputError as exc:
            if problems is not None:
                problems.append(Unreadable(obj, exc))
            raw = obj.get("spec")
            spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
            node = spec.get("nodeName")
            if isinstance(node, str) and node and spec.get("driver") == DRA_GPU_DRIVER:
                broken[node] = f"{describe(obj)} cannot be read (field {exc.field}: {exc.detail})"
            continue
        if found is not None:
            pools.setdefault(found.node, []).append(found)
    out: dict[str, DraNode] = {}
    for node, slices in pools.items():
        names = {s.pool for s in slices}
        if len(names) > 1:
            out[node] = DraNode(
                node, sorted(names)[0], problem=f"it has several pools ({', '.join(sorted(names))})"
            )
        else:
            out[node] = _pool_node(node, slices)
    for node, problem in broken.items():
        pool = out[node].pool if node in out else node
        out[node] = DraNode(node, pool, problem=problem)
    return out


def allocation_results(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """A ResourceClaim's allocated devices as (driver, pool, device, request); [] when not allocated."""
    allocation = get_map(obj, "status.allocation")
    if not allocation:
        return []
    field = "status.allocation.devices.results"
    results = mappings(get_map(obj, "status.allocation.devices").get("results"), obj=obj, field=field)
    out = []
    for where, entry in results:
        parts = []
        for key in ("driver", "pool", "device"):
            text = as_str(entry.get(key), obj=obj, field=f"{where}.{key}")
            if not text:
                raise InputError("is required but missing", obj=describe(obj), field=f"{where}.{key}")
            parts.append(text)
        request = as_str(entry.get("request"), obj=obj, field=f"{where}.request")
        out.append((parts[0], parts[1], parts[2], request))
    return out


def read_allocation(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A ResourceClaim's allocated devices as (driver, pool, device); [] when not allocated."""
    return [(driver, pool, device) for driver, pool, device, _ in allocation_results(obj)]


def allocated(
    objects: Iterable[dict[str, Any]],
    nodes: Mapping[str, DraNode],
    problems: list[Unreadable] | None = None,
) -> dict[str, dict[str, InUse]]:
    """Per node, the ``gpu.nvidia.com`` devices in use by device name, with the claim holding each.

    Every ResourceClaim counts, whoever made it. A device of a pool no node
    publishes is ignored; a claim that cannot be read goes to ``problems``.
    """
    by_pool = {dra.pool: dra for dra in nodes.values()}
    out: dict[str, dict[str, InUse]] = {}
    for obj in objects:
        if obj.get("kind") != "ResourceClaim" or not is_dra_kind(obj):
            continue
        try:
            results = read_allocation(obj)
        except InputError as exc:
            if problems is not None:
                problems.append(Unreadable(obj, exc))
            continue
        claim = f"{object_namespace(obj)}/{object_name(obj)}"
        for driver, pool, device in results:
            dra = by_pool.get(pool)
            if driver != DRA_GPU_DRIVER or dra is None:
                continue
            published = dra.device(device)
            held = out.setdefault(dra.node, {})
            held.setdefault(device, InUse(claim, device, published.uuid if published else ""))
    return out


def unavailable(
    uuids: Iterable[str],
    *,
    node: str,
    nodes: Mapping[str, DraNode],
    in_use: Mapping[str, Mapping[str, InUse]],
    claim: str = "",
) -> dict[str, str]:
    """Each of ``uuids`` that ``claim`` (``namespace/name``) could not get on ``node``, with why.

    A UUID is unavailable when the node's slice does not publish it (gone,
    unhealthy, another node's) or another claim's allocation holds it.
    """
    dra = nodes.get(node)
    held = in_use.get(node, {})
    out: dict[str, str] = {}
    for uuid in uuids:
        device = dra.by_uuid(uuid) if dra is not None else None
        if device is None:
            out[uuid] = f"not published by a {DRA_GPU_DRIVER} ResourceSlice of node {node}"
        elif device.name in held and held[device.name].claim != claim:
            out[uuid] = f"device {device.name} is allocated to ResourceClaim {held[device.name].claim}"
    return out
