"""Node capacity, checked independently: what the plan puts on each node and each GPU.

Every pod is booked on its node: CPU, memory, pod slots, extended resources,
and its GPUs by index (whole, or a share of compute and memory on each of its
GPUs, all different). MIG slices are extended resources, counted against what
the node advertises once the plan's layout changes apply. A GPU is given whole
to one pod at most, never to a pod and a share, never while a running pod
holds it, and shares never exceed its compute, its memory or its split count
(HAMi's most tasks per GPU). Where in-use GPUs have unknown indices no index
may be promised, because the free-looking GPU may be the one in use; a pod
given no indices takes as many GPUs as it asks for, a share a whole one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from optsched.model.placement import PodPlacement
from optsched.model.snapshot import FULL_GPU_MILLI, Node, NodeUsage, PodSet, Snapshot


@dataclass
class NodeLoad:
    """What the plan adds on one node."""

    cpu: int = 0
    mem: int = 0
    pods: int = 0
    ext: dict[str, int] = field(default_factory=dict)
    whole: dict[int, str] = field(default_factory=dict)
    """GPU index -> pod that takes it whole."""
    unindexed_whole: int = 0
    """GPUs of pods given no indices (a share counts as a whole GPU: the node picks it)."""
    share_milli: dict[int, int] = field(default_factory=dict)
    share_mem: dict[int, int] = field(default_factory=dict)
    share_pods: dict[int, list[str]] = field(default_factory=dict)
    unindexed_shares: int = 0


class DeviceBook:
    """The plan's pods booked per node; :meth:`check_nodes` then compares the totals with the nodes."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.loads: dict[str, NodeLoad] = {}

    def book(self, where: str, node: Node, ps: PodSet, pod: PodPlacement) -> list[str]:
        """Book one pod on ``node``; the violations its GPU indices make right away."""
        req = ps.request
        load = self.loads.setdefault(node.name, NodeLoad())
        load.cpu += req.cpu_milli
        load.mem += req.memory_mib
        load.pods += 1
        for name, amount in req.extended.items():
            load.ext[name] = load.ext.get(name, 0) + amount
        usage = self.snapshot.usage_of(node.name)
        if not req.gpus:
            return [f"{where}: pod asks for no GPU but is given GPUs {pod.gpus}"] if pod.gpus else []
        if pod.gpus is None:
            return _unindexed(where, ps, usage, load)
        return _indexed(where, node, ps, pod, usage, load)

    def check_nodes(self, mig_deltas: Mapping[str, Mapping[str, int]] | None = None) -> list[str]:
        """Every node whose resources or GPUs the plan over-commits.

        ``mig_deltas`` (node -> resource -> instances added, negative where
        removed) is what the plan's MIG layout changes do to the node's
        allocatable: the pods placed there count against the new layouts.
        """
        deltas = mig_deltas or {}
        nodes = {n.name: n for n in self.snapshot.nodes}
        violations: list[str] = []
        changed_only = sorted(n for n in deltas if n in nodes and n not in self.loads)
        for name in [*self.loads, *changed_only]:
            load = self.loads.get(name, NodeLoad())
            usage = self.snapshot.usage_of(name)
            violations += _resources(f"node {name}", nodes[name], usage, load, deltas.get(name, {}))
            violations += _gpus(f"node {name}", nodes[name], usage, load)
        return violations


def _unindexed(where: str, ps: PodSet, usage: NodeUsage, load: NodeLoad) -> list[str]:
    """A GPU pod without indices: allowed only where in-use GPUs have unknown indices, or for shares."""
    req = ps.request
    share = req.is_share
    violations = []
    if usage.unknown_index_gpus == 0 and not share:
        violations.append(
            f"{where}: no GPU indices given, though every in-use GPU of the node has a known index"
        )
    if ps.nvlink_required and req.gpus > 1 and not share:
        violations.append(f"{where}: NVLink island required but no GPU indices given")
    if share:
        load.unindexed_shares += req.gpus
    # The node picks the GPU: a share may open an untouched one, so it counts as a whole GPU.
    load.unindexed_whole += req.gpus
    return violations


def _indexed(
    where: str, node: Node, ps: PodSet, pod: PodPlacement, usage: NodeUsage, load: NodeLoad
) -> list[str]:
    req = ps.request
    share = req.is_share
    gpus = list(pod.gpus or ())
    violations = []
    if len(gpus) != req.gpus:
        violations.append(f"{where}: given {len(gpus)} GPUs {gpus}, pod asks for {req.gpus}")
    if len(set(gpus)) != len(gpus):
        violations.append(f"{where}: GPU index repeated in {gpus}")
    if not share and usage.unknown_index_gpus:
        violations.append(
            f"{where}: promises GPU indices {gpus}, but {usage.unknown_index_gpus} in-use GPUs "
            "of the node have unknown indices"
        )
    for gpu in sorted(set(gpus)):
        violations += _one_gpu(where, node, ps, pod, gpu, usage, load)
    if ps.nvlink_required and len(gpus) > 1 and not share:
        islands = node.nvlink_islands or tuple((i,) for i in range(node.gpu_count))
        if not any(set(gpus) <= set(island) for island in islands):
            violations.append(
                f"{where}: GPUs {gpus} are not inside one NVLink island, which the pod requires"
            )
    return violations


def _one_gpu(
    where: str, node: Node, ps: PodSet, pod: PodPlacement, gpu: int, usage: NodeUsage, load: NodeLoad
) -> list[str]:
    if not 0 <= gpu < node.gpu_count:
        return [f"{where}: GPU {gpu} does not exist (node has {node.gpu_count})"]
    violations = [f"{where}: GPU {gpu} is unhealthy"] if gpu in node.unhealthy_gpus else []
    used_milli = usage.gpu_milli[gpu] if gpu < len(usage.gpu_milli) else 0
    used_mem = usage.gpu_mem_mib[gpu] if gpu < len(usage.gpu_mem_mib) else 0
    used_tasks = usage.gpu_tasks[gpu] if gpu < len(usage.gpu_tasks) else 0
    if gpu in load.whole:
        return [*violations, f"{where}: GPU {gpu} is also given whole to {load.whole[gpu]}"]
    req = ps.request
    if req.is_share:
        if usage.unknown_index_gpus and used_milli == 0 and used_mem == 0 and used_tasks == 0:
            violations.append(
                f"{where}: GPU {gpu} looks free but may be held by one of the "
                f"{usage.unknown_index_gpus} in-use GPUs of unknown index"
            )
        need_mem = req.share_memory(node.gpu_memory_mib, hami=node.hami)
        load.share_milli[gpu] = load.share_milli.get(gpu, 0) + req.gpu_milli
        load.share_mem[gpu] = load.share_mem.get(gpu, 0) + need_mem
        load.share_pods.setdefault(gpu, []).append(where)
        milli = used_milli + load.share_milli[gpu]
        mem = used_mem + load.share_mem[gpu]
        if milli > FULL_GPU_MILLI:
            violations.append(f"{where}: GPU {gpu} compute over-committed ({milli}/{FULL_GPU_MILLI} milli)")
        # A snapshot may already show the memory over-used; only memory the plan adds counts against it.
        if node.gpu_memory_mib and need_mem and mem > node.gpu_memory_mib:
            violations.append(f"{where}: GPU {gpu} memory over-committed ({mem}/{node.gpu_memory_mib} MiB)")
        tasks = used_tasks + len(load.share_pods[gpu])
        if node.gpu_split and tasks > node.gpu_split:
            violations.append(f"{where}: GPU {gpu} runs {tasks} tasks, its split count is {node.gpu_split}")
        return violations
    if used_milli > 0 or used_mem > 0 or used_tasks > 0:
        violations.append(f"{where}: GPU {gpu} is already in use by a running pod")
    if gpu in load.share_pods:
        violations.append(f"{where}: GPU {gpu} is also shared by {load.share_pods[gpu][0]}")
    load.whole[gpu] = f"{ps.name}/{pod.index}"
    return violations


def _resources(
    where: str, node: Node, usage: NodeUsage, load: NodeLoad, mig_delta: Mapping[str, int]
) -> list[str]:
    violations = []
    if usage.cpu_milli + load.cpu > node.cpu_milli:
        violations.append(f"{where}: CPU over-committed ({usage.cpu_milli + load.cpu}m of {node.cpu_milli}m)")
    if usage.memory_mib + load.mem > node.memory_mib:
        violations.append(
            f"{where}: memory over-committed ({usage.memory_mib + load.mem} MiB of {node.memory_mib} MiB)"
        )
    if usage.pods + load.pods > node.max_pods:
        violations.append(f"{where}: pod slots over-committed ({usage.pods + load.pods} of {node.max_pods})")
    for resource in sorted({*load.ext, *mig_delta}):
        amount = load.ext.get(resource, 0)
        delta = mig_delta.get(resource, 0)
        have = node.extended.get(resource, 0) + delta - usage.extended.get(resource, 0)
        # Running pods over what the node advertises count only where the plan adds pods or removes slices.
        after = f" after the plan's MIG layout changes ({delta:+d})" if delta else ""
        # Free instances of a GPU whose layout change is in flight may vanish: none is handed out.
        offered = have - node.mig_unavailable.get(resource, 0)
        if amount > offered and amount > 0:
            changing = ", not counting those of GPUs whose layout is changing" if offered < have else ""
            free = f"{max(0, offered)} free{after}{changing}"
            violations.append(f"{where}: {resource} over-committed (plan takes {amount}, {free})")
        elif amount > have and delta < 0:
            violations.append(
                f"{where}: {resource}: running pods hold {usage.extended.get(resource, 0)}, the node has "
                f"{node.extended.get(resource, 0) + delta}{after}"
            )
    return violations


def _gpus(where: str, node: Node, usage: NodeUsage, load: NodeLoad) -> list[str]:
    healthy = [i for i in range(node.gpu_count) if i not in node.unhealthy_gpus]
    in_use = {
        i
        for i in healthy
        if (i < len(usage.gpu_milli) and usage.gpu_milli[i] > 0)
        or (i < len(usage.gpu_mem_mib) and usage.gpu_mem_mib[i] > 0)
        or (i < len(usage.gpu_tasks) and usage.gpu_tasks[i] > 0)
    }
    before = len(in_use) + usage.unknown_index_gpus
    taken = len(in_use | set(load.whole) | set(load.share_milli)) + usage.unknown_index_gpus
    taken += load.unindexed_whole
    violations = []
    # A snapshot may already be over-committed; only GPUs the plan adds count against it.
    if taken > len(healthy) and taken > before:
        violations.append(
            f"{where}: GPUs over-committed: {taken} busy after the plan "
            f"({usage.unknown_index_gpus} of unknown index in use), {len(healthy)} healthy"
        )
    if load.unindexed_shares:
        free_share = sum(
            FULL_GPU_MILLI - (usage.gpu_milli[i] if i < len(usage.gpu_milli) else 0)
            for i in healthy
            if i not in load.whole
        )
        if free_share - usage.unknown_index_gpus * FULL_GPU_MILLI <= 0:
            violations.append(
                f"{where}: GPU shares placed without indices on a node with no free GPU compute"
            )
    return violations
