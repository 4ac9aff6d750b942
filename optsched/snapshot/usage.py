"""The usage of bound and assumed pods folded into per-node, per-GPU accounting.

On a device-plugin node a pod's GPUs are the devices the node agent says it
holds, else its ``optsched.io/gpus`` annotation; on a HAMi node, HAMi's own
assignment. On a DRA node the GPUs in use are the devices ResourceClaims'
allocations hold (whoever made the claims), so a pod there counts for its CPU,
memory and pod slot only, and an assumed pod only for the planned GPUs no
claim holds yet (its own claim may already be allocated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optsched.model.names import GPUS_ANNOTATION
from optsched.model.snapshot import FULL_GPU_MILLI, AssumedPod, GpuMode, Node, NodeUsage, PodRequest
from optsched.snapshot.fields import describe, get_map
from optsched.snapshot.hami import DeviceUse, pod_devices
from optsched.snapshot.node_gpus import PodDevices
from optsched.snapshot.pods import gpu_indices, is_terminal, pod_request, share_milli_for_usage, valid_indices


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

    def book_claimed(self, indices: Iterable[int]) -> None:
        """Whole GPUs ResourceClaims' allocations hold (a DRA node): no pod, CPU or memory of their own."""
        for gpu in indices:
            if 0 <= gpu < self.node.gpu_count:
                self.gpu_milli[gpu] += FULL_GPU_MILLI
                self.gpu_mem[gpu] += self.node.gpu_memory_mib

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
    nodes: dict[str, Node],
    pods: Iterable[BoundPod],
    assumed: Iterable[AssumedPod] = (),
    claimed: Mapping[str, Iterable[int]] | None = None,
) -> tuple[dict[str, NodeUsage], list[str]]:
    """Usage per node from non-terminal pods bound to it (``spec.nodeName``) and assumed pods.

    A pod's GPU indices are the devices its node's NodeGPUs says it really
    holds (``BoundPod.held``), else its ``optsched.io/gpus`` annotation. A pod
    whose indices are missing or invalid holds GPUs of unknown index: they
    are counted (so capacity stays right) but no index is ever promised on
    their account. A share of unknown index is counted as a whole GPU, the
    only safe assumption. On a HAMi node the devices come from HAMi's own
    assignment annotation instead. On a DRA node the GPUs in use are
    ``claimed`` (node -> indices ResourceClaims' allocations hold) and pods
    hold none of their own; an assumed pod there takes only its planned GPUs
    no claim holds.
    """
    builders: dict[str, _UsageBuilder] = {}
    warnings: list[str] = []
    in_use = {name: frozenset(indices) for name, indices in (claimed or {}).items() if name in nodes}
    for bound in pods:
        if bound.node in nodes:
            builder = builders.setdefault(bound.node, _UsageBuilder(nodes[bound.node]))
            warnings += _book_bound(builder, bound)
    for slot in assumed:
        if slot.node in nodes:
            builder = builders.setdefault(slot.node, _UsageBuilder(nodes[slot.node]))
            warnings += _book_assumed(builder, slot, in_use.get(slot.node, frozenset()))
    for name, indices in in_use.items():
        builders.setdefault(name, _UsageBuilder(nodes[name])).book_claimed(indices)
    for builder in builders.values():
        warnings += builder.clamp()
    return {name: b.freeze() for name, b in builders.items()}, warnings


def _book_bound(builder: _UsageBuilder, bound: BoundPod) -> list[str]:
    node, pod, request = builder.node, bound.obj, bound.request
    if node.gpu_mode == GpuMode.DRA:
        # The claims' allocations say which GPUs are in use; the pod's own request would count them twice.
        return builder.book(request.model_copy(update={"gpus": 0}), None, who=describe(pod))
    if node.hami and request.gpus:
        devices, notes = pod_devices(pod, node, request.gpus, describe(pod))
        return notes + builder.book_hami(request, devices, who=describe(pod))
    if bound.held is not None and request.gpus:
        held = valid_indices(list(bound.held.indices or ()), node.gpu_count) if bound.held.indices else None
        return builder.book(request, held, who=describe(pod), source=bound.held.source)
    indices = gpu_indices(pod, node.gpu_count) if request.gpus else None
    return builder.book(request, indices, who=describe(pod))


def _book_assumed(builder: _UsageBuilder, slot: AssumedPod, claimed: frozenset[int]) -> list[str]:
    host = builder.node
    # HAMi picks a pod's devices itself, so a planned index is no record of where it runs.
    known = slot.gpus is not None and not host.hami
    indices = valid_indices(list(slot.gpus or ()), host.gpu_count) if known else None
    request = slot.request
    if host.gpu_mode == GpuMode.DRA and indices is not None:
        # A planned GPU a claim already holds is the pod's own claim (or taken): counted once, as claimed.
        # The planned GPUs are the pod's whether it asks through nvidia.com/gpu or a claim template.
        indices = [gpu for gpu in indices if gpu not in claimed]
        request = request.model_copy(update={"gpus": len(indices)})
    return builder.book(request, indices, who=f"a pod of {slot.workload} assumed on {host.name}")
