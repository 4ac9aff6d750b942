"""A ``NodeGPUs`` object (``optsched.io/v1alpha1``, written by the node agent) as typed facts.

The node agent publishes, per node, what its GPUs are (index, UUID, PCI bus id,
NUMA node, NVLink island, health) and which devices each pod's containers
really hold (kubelet's PodResources). Where a valid one exists it wins over
the node's ``optsched.io/gpu-topology`` annotation for islands, NUMA,
unhealthy GPUs and UUIDs, and its devices win over a pod's ``optsched.io/gpus``
annotation. This module reads one object; :mod:`optsched.snapshot.nodes`
applies the facts to the node and its pods.

It is read like the annotation: any field of the wrong type or out of range
is an :class:`~optsched.errors.InputError` naming the object and the field,
and the builder leaves the object out (the node falls back to its
annotation). A pod whose devices the object cannot place by index (a UUID
none of its GPUs has, and no ``gpuIndices`` for it) only makes that pod's
GPUs of unknown index, with a warning. A NodeGPUs that lists no GPUs has
reported nothing yet: it carries no facts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from optsched.errors import InputError
from optsched.model.mig import MigGpu
from optsched.snapshot.fields import as_map, as_str, describe, get_list, get_map, get_str, mappings
from optsched.snapshot.node_gpu_pods import PodDevices, read_pods
from optsched.snapshot.node_mig import read_mig_gpu
from optsched.topology.gpu_topology import MAX_ID_CHARS, GpuTopology, checked_islands

__all__ = ["HEALTH_STATES", "NodeGpuFacts", "PodDevices", "read_node_gpus"]

HEALTH_STATES = ("Healthy", "Unhealthy")


@dataclass(frozen=True)
class NodeGpuFacts:
    """What one NodeGPUs object says about its node: GPUs by index, and the devices pods hold."""

    node: str
    """The node it describes (the object's name)."""
    topology: GpuTopology
    gpu_count: int
    pods: dict[tuple[str, str], PodDevices]
    """By (namespace, name): pods listed with at least one GPU device."""
    warnings: tuple[str, ...] = ()
    """Pods whose devices could not be placed by index."""
    mig_gpus: tuple[MigGpu, ...] = ()
    """The MIG-enabled GPUs with their instances (:mod:`optsched.snapshot.node_mig`)."""

    def held_by(self, namespace: str, name: str) -> PodDevices | None:
        """The devices a pod really holds; None where the object does not list it with any."""
        return self.pods.get((namespace, name))

    def fitted(self, gpu_count: int, *, what: str) -> tuple[NodeGpuFacts, list[str]]:
        """The facts for a node of ``gpu_count`` GPUs; a warning where the object lists another number.

        The node then plans GPUs ``0..min(both)-1`` only: never more than
        either side says exist, with the object's islands, NUMA, UUIDs and
        health for those (a GPU it reports unhealthy stays excluded). ``what``
        names the node's own count in the warning.
        """
        if gpu_count == self.gpu_count:
            return self, []
        usable = min(gpu_count, self.gpu_count)
        topo = self.topology
        islands = tuple(t for t in (tuple(g for g in i if g < usable) for i in topo.islands) if t)
        fitted = GpuTopology(
            islands=islands,
            numa=topo.numa[:usable],
            unhealthy=frozenset(g for g in topo.unhealthy if g < usable),
            uuids=topo.uuids[:usable],
            pci_bus_ids=topo.pci_bus_ids[:usable],
        )
        planned = f"GPUs 0..{usable - 1}" if usable else "no GPU"
        warning = (
            f"Node {self.node}: NodeGPUs {self.node} lists {self.gpu_count} GPUs but {what} {gpu_count}; "
            f"only {planned} are planned, with the NodeGPUs islands, NUMA and health for them"
        )
        mig = tuple(g for g in self.mig_gpus if g.index < usable)
        return replace(self, topology=fitted, gpu_count=usable, mig_gpus=mig), [warning]


@dataclass(frozen=True)
class _Gpu:
    where: str
    """The entry's field path, ``status.gpus[i]``."""
    index: int
    uuid: str
    pci_bus_id: str
    numa: int | None
    island: int | None
    healthy: bool
    mig: MigGpu | None = None
    """Set where MIG is enabled: the GPU is its slices (``nvidia.com/mig-*``), never a whole GPU."""


def _optional_number(entry: dict[str, Any], key: str, *, obj: dict[str, Any], where: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(
            f"expected a whole number >= 0 or null, got {value!r}", obj=describe(obj), field=f"{where}.{key}"
        )
    return value


def _device_id(entry: dict[str, Any], key: str, *, obj: dict[str, Any], where: str, required: bool) -> str:
    text = as_str(entry.get(key), obj=obj, field=f"{where}.{key}")
    if (required and not text) or len(text) > MAX_ID_CHARS:
        raise InputError(
            f"expected 1..{MAX_ID_CHARS} characters, got {text[:40]!r}",
            obj=describe(obj),
            field=f"{where}.{key}",
        )
    return text


def _gpu(entry: dict[str, Any], *, obj: dict[str, Any], where: str) -> _Gpu:
    index = _optional_number(entry, "index", obj=obj, where=where)
    if index is None:
        raise InputError("is required but missing", obj=describe(obj), field=f"{where}.index")
    health = as_map(entry.get("health"), obj=obj, field=f"{where}.health")
    state = as_str(health.get("state"), obj=obj, field=f"{where}.health.state") or "Healthy"
    if state not in HEALTH_STATES:
        raise InputError(
            f"expected {' or '.join(HEALTH_STATES)}, got {state!r}",
            obj=describe(obj),
            field=f"{where}.health.state",
        )
    as_str(health.get("reason"), obj=obj, field=f"{where}.health.reason")
    uuid = _device_id(entry, "uuid", obj=obj, where=where, required=True)
    return _Gpu(
        where=where,
        index=index,
        uuid=uuid,
        pci_bus_id=_device_id(entry, "pciBusId", obj=obj, where=where, required=False),
        numa=_optional_number(entry, "numa", obj=obj, where=where),
        island=_optional_number(entry, "island", obj=obj, where=where),
        healthy=state == "Healthy",
        mig=read_mig_gpu(entry, obj=obj, where=where, index=index, uuid=uuid),
    )


def _gpus(obj: dict[str, Any]) -> list[_Gpu]:
    """``status.gpus`` by index: every index 0..n-1 once, every UUID once."""
    listed = mappings(get_list(obj, "status.gpus"), obj=obj, field="status.gpus")
    gpus = [_gpu(entry, obj=obj, where=where) for where, entry in listed]
    count = len(gpus)
    seen: dict[str, int] = {}
    for number, gpu in enumerate(gpus):
        where = gpu.where
        if gpu.index >= count or any(g.index == gpu.index for g in gpus[:number]):
            raise InputError(
                f"GPU index {gpu.index}: the {count} GPUs must be numbered 0..{count - 1}, each once",
                obj=describe(obj),
                field=f"{where}.index",
            )
        if gpu.uuid in seen:
            raise InputError(
                f"UUID {gpu.uuid!r} is also GPU {seen[gpu.uuid]}'s", obj=describe(obj), field=f"{where}.uuid"
            )
        seen[gpu.uuid] = gpu.index
    return sorted(gpus, key=lambda g: g.index)


def _islands(obj: dict[str, Any], gpus: list[_Gpu]) -> tuple[tuple[int, ...], ...]:
    """``status.nvlinkIslands``, or the islands the GPUs' ``island`` numbers make; each GPU in one."""
    listed = get_list(obj, "status.nvlinkIslands")
    count = len(gpus)
    if not listed:
        groups: dict[int, list[int]] = {}
        for gpu in gpus:
            if gpu.island is not None:
                groups.setdefault(gpu.island, []).append(gpu.index)
        return checked_islands(groups.values(), count)
    try:
        islands = checked_islands(listed, count)
    except ValueError as exc:
        raise InputError(str(exc), obj=describe(obj), field="status.nvlinkIslands") from None
    for gpu in gpus:
        if gpu.island is not None and (gpu.island >= len(listed) or gpu.index not in listed[gpu.island]):
            raise InputError(
                f"GPU {gpu.index} is not in status.nvlinkIslands[{gpu.island}]",
                obj=describe(obj),
                field=f"{gpu.where}.island",
            )
    return islands


def read_node_gpus(obj: dict[str, Any]) -> NodeGpuFacts | None:
    """The facts of one NodeGPUs object; None when it lists no GPUs (nothing reported yet)."""
    name = get_str(obj, "metadata.name", required=True)
    get_map(obj, "status")
    gpus = _gpus(obj)
    if not gpus:
        return None
    numa = tuple(g.numa for g in gpus)
    topology = GpuTopology(
        islands=_islands(obj, gpus),
        numa=tuple(n for n in numa if n is not None) if None not in numa else (),
        # Whole-GPU placement skips unhealthy GPUs and those MIG partitions alike.
        unhealthy=frozenset(g.index for g in gpus if not g.healthy or g.mig is not None),
        uuids=tuple(g.uuid for g in gpus),
        pci_bus_ids=tuple(g.pci_bus_id for g in gpus) if all(g.pci_bus_id for g in gpus) else (),
    )
    pods, warnings = read_pods(obj, topology.uuids)
    mig = tuple(g.mig for g in gpus if g.mig is not None and g.healthy)
    return NodeGpuFacts(name, topology, len(gpus), pods, tuple(warnings), mig)
