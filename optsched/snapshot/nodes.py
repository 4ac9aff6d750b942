"""Nodes as the planner sees them: resources, GPUs (device plugin, HAMi or DRA) and their topology."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.model.mig import MigGpu
from optsched.model.names import (
    GPU_MEMORY_LABEL,
    GPU_RESOURCE,
    GPU_TOPOLOGY_ANNOTATION,
    HAMI_REGISTER_ANNOTATION,
    MIG_PREFIX,
    PRODUCT_LABEL,
)
from optsched.model.snapshot import GpuMode, Node
from optsched.snapshot.dra import DraNode
from optsched.snapshot.dra_layout import dra_layout
from optsched.snapshot.fields import describe, get_list, get_map, get_str, string_map
from optsched.snapshot.gpu_count import gpu_index_space
from optsched.snapshot.hami import HamiNode, read_register
from optsched.snapshot.node_gpus import NodeGpuFacts
from optsched.snapshot.node_mig import advertised_as_reported
from optsched.snapshot.quantity import count, cpu_milli, memory_mib
from optsched.snapshot.scheduling import parse_taints
from optsched.topology.gpu_topology import GpuTopology, no_nvlink, parse_gpu_topology

MAX_GPUS_PER_NODE = 1024
"""More than any board holds, even as HAMi's device plugin multiplies GPUs by its split count."""


def parse_node(
    obj: dict[str, Any],
    node_gpus: Mapping[str, NodeGpuFacts] | None = None,
    dra: Mapping[str, DraNode] | None = None,
) -> tuple[Node | None, list[str]]:
    """A Node, or None with a warning when its GPU topology or HAMi register annotation is unusable.

    On a HAMi node (:mod:`optsched.snapshot.hami`) the GPUs are the physical
    ones HAMi registers, not the ``nvidia.com/gpu`` it advertises (GPUs times
    its split count). The node's ``NodeGPUs`` facts (in ``node_gpus`` by node
    name) win over its ``optsched.io/gpu-topology`` annotation, which is then
    not read. A node NVIDIA's DRA driver publishes (in ``dra`` by node name)
    is a DRA node: its GPUs are its ResourceSlice's devices, joined to the
    agent's topology by UUID (:mod:`optsched.snapshot.dra_layout`).
    """
    name = get_str(obj, "metadata.name", required=True)
    labels = string_map(get_map(obj, "metadata").get("labels"), obj=obj, field="metadata.labels")
    annotations = string_map(
        get_map(obj, "metadata").get("annotations"), obj=obj, field="metadata.annotations"
    )
    quantity = _Allocatable(obj)
    extended = {k: quantity(k, count) for k in quantity.names if k.startswith(MIG_PREFIX)}
    facts = (node_gpus or {}).get(name)
    dra_node = (dra or {}).get(name)
    gpus: _Gpus | None
    if dra_node is not None:
        gpus, notes = _dra_gpus(name, dra_node, facts, annotations)
        hami = None
    else:
        gpus, hami, notes = _plugin_gpus(obj, name, quantity, facts, annotations)
    if gpus is None:
        return None, notes
    memory = labels.get(GPU_MEMORY_LABEL, "")
    node = Node(
        name=name,
        labels=labels,
        taints=parse_taints(get_map(obj, "spec").get("taints"), obj=obj, field="spec.taints"),
        cpu_milli=quantity("cpu", cpu_milli),
        memory_mib=quantity("memory", memory_mib),
        max_pods=quantity("pods", count, default=110),
        gpu_count=gpus.count,
        gpu_product=gpus.product or labels.get(PRODUCT_LABEL, ""),
        gpu_memory_mib=gpus.memory_mib or _label_mib(memory),
        nvlink_islands=gpus.topology.islands,
        numa=gpus.topology.numa,
        unhealthy_gpus=gpus.topology.unhealthy,
        gpu_uuids=gpus.topology.uuids,
        extended=extended,
        ready=_ready(obj),
        unschedulable=bool(get_map(obj, "spec").get("unschedulable")),
        gpu_mode=gpus.mode,
        mig_gpus=_mig_gpus(facts, gpus),
    )
    node = advertised_as_reported(node)
    if hami is None:
        return node, notes
    advertised = quantity(GPU_RESOURCE, count)
    return hami.applied_to(node, advertised=advertised), notes + _uuid_conflict(name, gpus.topology, hami)


def _mig_gpus(facts: NodeGpuFacts | None, gpus: _Gpus) -> tuple[MigGpu, ...]:
    """The NodeGPUs's MIG-enabled GPUs inside the node's GPU index space (device-plugin nodes only:
    NVIDIA's mixed strategy advertises their instances as ``nvidia.com/mig-<profile>``)."""
    if facts is None or gpus.mode is not GpuMode.DEVICE_PLUGIN:
        return ()
    return tuple(g for g in facts.mig_gpus if g.index < gpus.count)


@dataclass(frozen=True)
class _Gpus:
    """A node's GPUs as read: how many, their topology, and what the DRA slice says of them."""

    count: int
    topology: GpuTopology
    mode: GpuMode = GpuMode.DEVICE_PLUGIN
    product: str = ""
    memory_mib: int = 0


def _dra_gpus(
    name: str, dra_node: DraNode, facts: NodeGpuFacts | None, annotations: dict[str, str]
) -> tuple[_Gpus, list[str]]:
    layout, notes = dra_layout(name, dra_node, facts, annotations)
    if HAMI_REGISTER_ANNOTATION in annotations:
        notes.append(f"Node {name}: a DRA node; its {HAMI_REGISTER_ANNOTATION} annotation is not read")
    gpus = _Gpus(layout.gpu_count, layout.topology, GpuMode.DRA, layout.product, layout.memory_mib)
    return gpus, notes


def _plugin_gpus(
    obj: dict[str, Any],
    name: str,
    quantity: _Allocatable,
    facts: NodeGpuFacts | None,
    annotations: dict[str, str],
) -> tuple[_Gpus | None, HamiNode | None, list[str]]:
    """The GPUs of a device-plugin node: ``nvidia.com/gpu`` (or HAMi's register) and the agent's topology."""
    gpu_count = quantity(GPU_RESOURCE, count)
    if gpu_count > MAX_GPUS_PER_NODE:
        raise InputError(
            f"{gpu_count} GPUs on one node is beyond what optsched reads (at most {MAX_GPUS_PER_NODE})",
            obj=describe(obj),
            field=f"status.allocatable.{GPU_RESOURCE}",
        )
    hami: HamiNode | None = None
    if HAMI_REGISTER_ANNOTATION in annotations:
        try:
            hami = read_register(annotations[HAMI_REGISTER_ANNOTATION])
        except ValueError as exc:
            warning = f"Node {name}: annotation {HAMI_REGISTER_ANNOTATION} is malformed ({exc}); "
            return None, None, [warning + "node left out of planning"]
        gpu_count = hami.gpu_count
    if hami is None:
        gpu_count = gpu_index_space(obj, gpu_count, facts, annotations, MAX_GPUS_PER_NODE)
    topology, gpu_count, notes = _topology(name, annotations, gpu_count, facts, hami=hami is not None)
    return (_Gpus(gpu_count, topology) if topology is not None else None), hami, notes


def _topology(
    name: str, annotations: dict[str, str], gpu_count: int, facts: NodeGpuFacts | None, *, hami: bool
) -> tuple[GpuTopology | None, int, list[str]]:
    """The node's GPU topology and GPU count: its NodeGPUs, else its annotation, else no NVLink.

    None (with a warning) for a malformed annotation, which takes the node
    out of planning. A NodeGPUs listing another number of GPUs than the node
    has is fitted to the smaller (:meth:`NodeGpuFacts.fitted`), except on a
    HAMi node: HAMi numbers the devices its pod records name, so there the
    NodeGPUs is not used (with a warning) and the annotation is read.
    """
    notes: list[str] = []
    if facts is not None and not (hami and facts.gpu_count != gpu_count):
        fitted, notes = facts.fitted(gpu_count, what=f"the node advertises {GPU_RESOURCE}:")
        return fitted.topology, fitted.gpu_count, notes
    if facts is not None:
        notes = [
            f"Node {name}: NodeGPUs {name} lists {facts.gpu_count} GPUs but {HAMI_REGISTER_ANNOTATION} "
            f"{gpu_count}; HAMi's register and the {GPU_TOPOLOGY_ANNOTATION} annotation are used instead"
        ]
    raw = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    if raw is None:
        return no_nvlink(gpu_count), gpu_count, notes
    try:
        return parse_gpu_topology(raw, gpu_count), gpu_count, notes
    except ValueError as exc:
        warning = f"Node {name}: annotation {GPU_TOPOLOGY_ANNOTATION} is malformed ({exc}); "
        return None, gpu_count, [*notes, warning + "node left out of planning"]


def _uuid_conflict(name: str, topology: GpuTopology, hami: HamiNode) -> list[str]:
    """HAMi's register numbers the GPUs its pod records name, so its UUIDs win; a warning if they differ."""
    registered = tuple(d.uuid for d in hami.devices)
    if not topology.uuids or topology.uuids == registered:
        return []
    return [
        f"Node {name}: the GPU UUIDs of its NodeGPUs or {GPU_TOPOLOGY_ANNOTATION} annotation differ from "
        f"those of {HAMI_REGISTER_ANNOTATION}; HAMi's are used (its pod records name them)"
    ]


class _Allocatable:
    """``status.allocatable`` (or ``status.capacity``) quantities, read with errors naming the field.

    Capacities round down, so a plan never promises more than the node has.
    """

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.values = get_map(obj, "status.allocatable") or get_map(obj, "status.capacity")
        if not self.values:
            raise InputError(
                "is required but missing (status.capacity too)", obj=describe(obj), field="status.allocatable"
            )

    @property
    def names(self) -> list[str]:
        return list(self.values)

    def __call__(self, key: str, parse: Any, default: int = 0) -> int:
        if key not in self.values:
            return default
        try:
            raw = self.values[key]
            value: int = count(raw) if parse is count else parse(raw, round_up=False)
        except InputError as exc:
            raise InputError(exc.detail, obj=describe(self.obj), field=f"status.allocatable.{key}") from None
        if value < 0:
            raise InputError(
                f"must not be negative, got {raw!r}",
                obj=describe(self.obj),
                field=f"status.allocatable.{key}",
            )
        return value


def _ready(obj: dict[str, Any]) -> bool:
    """The Ready condition; a node that reports no conditions at all counts as ready."""
    conditions = get_list(obj, "status.conditions")
    if not conditions:
        return True
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict)
    )


def _label_mib(raw: str) -> int:
    """GFD's ``nvidia.com/gpu.memory`` label (MiB), 0 where it is not a plain number."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else 0
