"""Nodes, and the usage of bound pods folded into per-node, per-GPU accounting."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.errors import InputError
from optsched.model.names import (
    GPU_MEMORY_LABEL,
    GPU_RESOURCE,
    GPU_TOPOLOGY_ANNOTATION,
    GPUS_ANNOTATION,
    HAMI_REGISTER_ANNOTATION,
    MIG_PREFIX,
    PRODUCT_LABEL,
)
from optsched.model.snapshot import FULL_GPU_MILLI, AssumedPod, Node, NodeUsage, PodRequest
from optsched.snapshot.fields import describe, get_list, get_map, get_str, string_map
from optsched.snapshot.gpu_count import gpu_index_space
from optsched.snapshot.hami import DeviceUse, HamiNode, pod_devices, read_register
from optsched.snapshot.node_gpus import NodeGpuFacts, PodDevices
from optsched.snapshot.pods import gpu_indices, is_terminal, pod_request, share_milli_for_usage, valid_indices
from optsched.snapshot.quantity import count, cpu_milli, memory_mib
from optsched.snapshot.scheduling import parse_taints
from optsched.topology.gpu_topology import GpuTopology, no_nvlink, parse_gpu_topology

MAX_GPUS_PER_NODE = 1024
"""More than any board holds, even as HAMi's device plugin multiplies GPUs by its split count."""


def parse_node(
    obj: dict[str, Any], node_gpus: Mapping[str, NodeGpuFacts] | None = None
) -> tuple[Node | None, list[str]]:
    """A Node, or None with a warning when its GPU topology or HAMi register annotation is unusable.

    On a HAMi node (:mod:`optsched.snapshot.hami`) the GPUs are the physical
    ones HAMi registers, not the ``nvidia.com/gpu`` it advertises (GPUs times
    its split count). The node's ``NodeGPUs`` facts (in ``node_gpus`` by node
    name) win over its ``optsched.io/gpu-topology`` annotation, which is then
    not read.
    """
    name = get_str(obj, "metadata.name", required=True)
    labels = string_map(get_map(obj, "metadata").get("labels"), obj=obj, field="metadata.labels")
    annotations = string_map(
        get_map(obj, "metadata").get("annotations"), obj=obj, field="metadata.annotations"
    )
    quantity = _Allocatable(obj)
    advertised = gpu_count = quantity(GPU_RESOURCE, count)
    if gpu_count > MAX_GPUS_PER_NODE:
        raise InputError(
            f"{gpu_count} GPUs on one node is beyond what optsched reads (at most {MAX_GPUS_PER_NODE})",
            obj=describe(obj),
            field=f"status.allocatable.{GPU_RESOURCE}",
        )
    extended = {k: quantity(k, count) for k in quantity.names if k.startswith(MIG_PREFIX)}
    hami: HamiNode | None = None
    if HAMI_REGISTER_ANNOTATION in annotations:
        try:
            hami = read_register(annotations[HAMI_REGISTER_ANNOTATION])
        except ValueError as exc:
            warning = f"Node {name}: annotation {HAMI_REGISTER_ANNOTATION} is malformed ({exc}); "
            return None, [warning + "node left out of planning"]
        gpu_count = hami.gpu_count
    facts = (node_gpus or {}).get(name)
    gpu_count = gpu_count if hami else gpu_index_space(obj, gpu_count, facts, annotations, MAX_GPUS_PER_NODE)
    topology, gpu_count, notes = _topology(name, annotations, gpu_count, facts, hami=hami is not None)
    if topology is None:
        return None, notes
    memory = labels.get(GPU_MEMORY_LABEL, "")
    node = Node(
        name=name,
        labels=labels,
        taints=parse_taints(get_map(obj, "spec").get("taints"), obj=obj, field="spec.taints"),
        cpu_milli=quantity("cpu", cpu_milli),
        memory_mib=quantity("memory", memory_mib),
        max_pods=quantity("pods", count, default=110),
        gpu_count=gpu_count,
        gpu_product=labels.get(PRODUCT_LABEL, ""),
        gpu_memory_mib=int(memory) if memory.isdigit() and len(memory) < 10 else 0,
        nvlink_islands=topology.islands,
        numa=topology.numa,
        unhealthy_gpus=topology.unhealthy,
        gpu_uuids=topology.uuids,
        extended=extended,
        ready=_ready(obj),
        unschedulable=bool(get_map(obj, "spec").get("unschedulable")),
    )
    if hami is None:
        return node, notes
    return hami.applied_to(node, advertised=advertised), notes + _uuid_conflict(name, topology, hami)


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


@dataclass
class _UsageBuilder:
    node: Node
    cpu: int = 0
    mem: int = 0
    pods: int = 0
    unknown: int = 0
    gpu_milli: list[int] = field(default_factory=list)
    gpu_mem: list[int] = field(default_factory=list)
    gpu_tasks: list[int] = field(default_factory=list)
    extended: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.gpu_milli = [0] * self.node.gpu_count
        self.gpu_mem = [0] * self.node.gpu_count
        self.gpu_tasks = [0] * self.node.gpu_count

    def book(
        self, request: PodRequest, indices: list[int] | None, *, who: str, source: str = GPUS_ANNOTATION
    ) -> list[str]:
        """Count one pod; a warning when its GPU indices (read from ``source``) do not match its request."""
        self.cpu += request.cpu_milli
        self.mem += request.memory_mib
        self.pods += 1
        for name, amount in request.extended.items():
            self.extended[name] = self.extended.get(name, 0) + amount
        if not request.gpus:
            return []
        warnings = []
        if indices is not None and len(indices) != request.gpus:
            warnings.append(
                f"{who}: {source} lists {len(indices)} GPUs but the pod "
                f"requests {request.gpus}; its GPU indices are treated as unknown"
            )
            indices = None
        if indices is None:
            self.unknown += request.gpus
            return warnings
        for gpu in indices:
            if request.is_share:
                self.gpu_milli[gpu] += share_milli_for_usage(request, self.node.gpu_memory_mib)
                self.gpu_mem[gpu] += request.share_memory(self.node.gpu_memory_mib)
            else:
                self.gpu_milli[gpu] += FULL_GPU_MILLI
                self.gpu_mem[gpu] += self.node.gpu_memory_mib
        return warnings

    def book_hami(self, request: PodRequest, devices: list[DeviceUse] | None, *, who: str) -> list[str]:
        """Count a pod on a HAMi node: its GPUs as HAMi's assignment records them (unknown without one)."""
        if devices is None:
            return self.book(request, None, who=who)
        warnings = self.book(request.model_copy(update={"gpus": 0}), None, who=who)
        for use in devices:
            self.gpu_milli[use.index] += use.milli
            self.gpu_mem[use.index] += use.memory_mib
            self.gpu_tasks[use.index] += 1
        return warnings

    def clamp(self) -> list[str]:
        """GPUs booked past their compute or memory count as full, with a warning naming them."""
        warnings = []
        name = self.node.name
        over = [g for g, used in enumerate(self.gpu_milli) if used > FULL_GPU_MILLI]
        if over:
            warnings.append(
                f"Node {name}: GPU(s) {over} are used by more than their capacity according to "
                "bound pods; they are treated as full"
            )
            self.gpu_milli = [min(u, FULL_GPU_MILLI) for u in self.gpu_milli]
        total = self.node.gpu_memory_mib
        over = [g for g, used in enumerate(self.gpu_mem) if total and used > total]
        if over:
            warnings.append(
                f"Node {name}: GPU(s) {over} have more memory in use than their {total} MiB according "
                "to bound pods; their memory is treated as full"
            )
            self.gpu_mem = [min(u, total) for u in self.gpu_mem]
        return warnings

    def freeze(self) -> NodeUsage:
        return NodeUsage(
            cpu_milli=self.cpu,
            memory_mib=self.mem,
            pods=self.pods,
            gpu_milli=tuple(self.gpu_milli),
            gpu_mem_mib=tuple(self.gpu_mem),
            unknown_index_gpus=self.unknown,
            extended=self.extended,
            gpu_tasks=tuple(self.gpu_tasks) if self.node.hami else (),
        )


def pod_node(pod: dict[str, Any]) -> str | None:
    """The node a non-terminal pod is bound to (``spec.nodeName``), or None."""
    spec = pod.get("spec")
    node_name = spec.get("nodeName") if isinstance(spec, dict) else None
    if not isinstance(node_name, str) or not node_name or is_terminal(pod):
        return None
    return node_name


def pod_usage_request(pod: dict[str, Any]) -> PodRequest:
    """What a bound pod takes on its node; an :class:`InputError` names a field that cannot be read."""
    return pod_request(get_map(pod, "spec"), obj=pod, field="spec")


@dataclass(frozen=True)
class BoundPod:
    """A non-terminal pod bound to a node, with its request read once."""

    obj: dict[str, Any]
    node: str
    request: PodRequest
    held: PodDevices | None = None
    """The devices its node's NodeGPUs says it really holds; None where it lists none for the pod."""


def node_usage(
    nodes: dict[str, Node], pods: list[dict[str, Any]], assumed: Iterable[AssumedPod] = ()
) -> tuple[dict[str, NodeUsage], list[str]]:
    """:func:`usage_of` raw pods: those bound to one of ``nodes`` are read (an unreadable one raises)."""
    bound = []
    for pod in pods:
        node_name = pod_node(pod)
        if node_name is not None and node_name in nodes:
            bound.append(BoundPod(pod, node_name, pod_usage_request(pod)))
    return usage_of(nodes, bound, assumed)


def usage_of(
    nodes: dict[str, Node], pods: Iterable[BoundPod], assumed: Iterable[AssumedPod] = ()
) -> tuple[dict[str, NodeUsage], list[str]]:
    """Usage per node from non-terminal pods bound to it (``spec.nodeName``) and assumed pods.

    A pod's GPU indices are the devices its node's NodeGPUs says it really
    holds (``BoundPod.held``), else its ``optsched.io/gpus`` annotation. A pod
    whose indices are missing or invalid holds GPUs of unknown index: they
    are counted (so capacity stays right) but no index is ever promised on
    their account. A share of unknown index is counted as a whole GPU, the
    only safe assumption. On a HAMi node the devices come from HAMi's own
    assignment annotation instead.
    """
    builders: dict[str, _UsageBuilder] = {}
    warnings: list[str] = []
    for bound in pods:
        if bound.node not in nodes:
            continue
        node, pod, request = nodes[bound.node], bound.obj, bound.request
        builder = builders.setdefault(bound.node, _UsageBuilder(node))
        if node.hami and request.gpus:
            devices, notes = pod_devices(pod, node, request.gpus, describe(pod))
            warnings += notes + builder.book_hami(request, devices, who=describe(pod))
            continue
        if bound.held is not None and request.gpus:
            held = (
                valid_indices(list(bound.held.indices or ()), node.gpu_count) if bound.held.indices else None
            )
            warnings += builder.book(request, held, who=describe(pod), source=bound.held.source)
            continue
        indices = gpu_indices(pod, node.gpu_count) if request.gpus else None
        warnings += builder.book(request, indices, who=describe(pod))
    for slot in assumed:
        if slot.node not in nodes:
            continue
        host = nodes[slot.node]
        # HAMi picks a pod's devices itself, so a planned index is no record of where it runs.
        known = slot.gpus is not None and not host.hami
        indices = valid_indices(list(slot.gpus or ()), host.gpu_count) if known else None
        builder = builders.setdefault(slot.node, _UsageBuilder(host))
        warnings += builder.book(
            slot.request, indices, who=f"a pod of {slot.workload} assumed on {host.name}"
        )
    for builder in builders.values():
        warnings += builder.clamp()
    return {name: b.freeze() for name, b in builders.items()}, warnings
