"""What an agent publishes for its node, computed from one discovery pass: pure values, no I/O.

Three views of the same facts: the ``optsched.io/gpu-topology`` annotation the
planner has always read, the ``NodeGPUs`` status (identity, island, health,
MIG and the devices pods hold), and, only where NVIDIA's GPU Feature Discovery
does not run, the GFD labels the planner matches products with.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from optsched.agent.devices import Discovery, GpuDevice
from optsched.agent.health import HEALTHY, GpuHealth
from optsched.agent.podresources import PodDevices
from optsched.mig.layout import mixed_strategy_resources
from optsched.model.names import GPU_RESOURCE

GFD_MARKER_LABEL = "nvidia.com/gfd.timestamp"
"""GPU Feature Discovery writes this on every node it labels: where it is present, GFD owns the labels."""
AGENT_LABELS_MARKER = "optsched.io/gpu-labels"
"""Set by the agent on nodes it labels itself, so a later GFD install can be told apart."""


def unhealthy_indices(health: Mapping[int, GpuHealth]) -> list[int]:
    return sorted(i for i, h in health.items() if h.state == "Unhealthy")


def topology_annotation(
    discovery: Discovery, islands: Sequence[Sequence[int]], health: Mapping[int, GpuHealth]
) -> str:
    """The ``optsched.io/gpu-topology`` JSON: islands, NUMA, unhealthy, UUIDs and bus ids per index."""
    gpus = sorted(discovery.gpus, key=lambda g: g.index)
    value: dict[str, Any] = {"nvlinkIslands": [list(i) for i in islands]}
    if gpus and all(g.numa is not None for g in gpus):
        value["numa"] = [g.numa for g in gpus]
    value["unhealthy"] = unhealthy_indices(health)
    value["uuids"] = [g.uuid for g in gpus]
    value["pciBusIds"] = [g.pci_bus_id for g in gpus]
    return json.dumps(value, separators=(",", ":"))


def _mig_view(gpu: GpuDevice, busy: Collection[tuple[int, int]]) -> dict[str, Any]:
    """MIG mode and instances; an instance is in use when NVML reports work on it or a pod holds (or,
    where which instance a pod got is not known, may hold) it: the planner keeps those where they are."""
    return {
        "capable": gpu.mig_capable,
        "enabled": gpu.mig_enabled,
        "instances": [
            {
                "profile": m.profile,
                "start": m.start,
                "size": m.size,
                "uuid": m.uuid,
                "inUse": m.in_use or (gpu.index, m.start) in busy,
            }
            for m in sorted(gpu.mig_instances, key=lambda m: m.start)
        ],
    }


def _gpu_view(
    gpu: GpuDevice, island: int, health: GpuHealth, busy: Collection[tuple[int, int]]
) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "minor": gpu.minor,
        "uuid": gpu.uuid,
        "pciBusId": gpu.pci_bus_id,
        "numa": gpu.numa,
        "island": island,
        "product": gpu.product,
        "memoryMiB": gpu.memory_mib,
        "clique": gpu.clique,
        "health": {"state": health.state, "reason": health.reason},
        "mig": _mig_view(gpu, busy),
    }


def device_index(discovery: Discovery) -> dict[str, int]:
    """GPU UUID and MIG instance UUID -> the GPU index they belong to."""
    out: dict[str, int] = {}
    for gpu in discovery.gpus:
        out[gpu.uuid] = gpu.index
        for instance in gpu.mig_instances:
            if instance.uuid:
                out[instance.uuid] = gpu.index
    return out


def pods_view(pods: Sequence[PodDevices], discovery: Discovery) -> list[dict[str, Any]]:
    """``status.pods``: per container the whole GPUs (UUID and index) and MIG devices it holds."""
    gpu_uuids = {g.uuid: g.index for g in discovery.gpus}
    mig_uuids = {m.uuid for g in discovery.gpus for m in g.mig_instances if m.uuid}
    out = []
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        containers = []
        for container in pod.containers:
            ids = [d for _, devices in container.devices for d in devices]
            whole = [d for d in ids if d in gpu_uuids]
            containers.append(
                {
                    "name": container.name,
                    "gpuUUIDs": whole,
                    "gpuIndices": [gpu_uuids[d] for d in whole],
                    "migUUIDs": [d for d in ids if d in mig_uuids],
                }
            )
        if any(c["gpuUUIDs"] or c["migUUIDs"] for c in containers):
            out.append({"namespace": pod.namespace, "name": pod.name, "containers": containers})
    return out


def gpus_view(
    discovery: Discovery,
    islands: Sequence[Sequence[int]],
    health: Mapping[int, GpuHealth],
    busy: Collection[tuple[int, int]] = (),
) -> list[dict[str, Any]]:
    """``status.gpus``; ``busy``: ``(GPU, start)`` of the MIG instances pods hold or may hold."""
    island_of = {gpu: number for number, island in enumerate(islands) for gpu in island}
    return [
        _gpu_view(g, island_of.get(g.index, -1), health.get(g.index, HEALTHY), busy)
        for g in sorted(discovery.gpus, key=lambda g: g.index)
    ]


def gfd_labels(discovery: Discovery, node_labels: Mapping[str, str]) -> dict[str, str]:
    """GFD's product, memory, count, MIG and clique labels, or nothing where GFD labels the node itself."""
    if GFD_MARKER_LABEL in node_labels or not discovery.gpus:
        return {}
    first = min(discovery.gpus, key=lambda g: g.index)
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": first.product,
        "nvidia.com/gpu.memory": str(first.memory_mib),
        "nvidia.com/gpu.count": str(len(discovery.gpus)),
        "nvidia.com/mig.capable": "true" if first.mig_capable else "false",
        AGENT_LABELS_MARKER: "agent",
    }
    cliques = {g.clique for g in discovery.gpus}
    if len(cliques) == 1 and first.clique:
        labels["nvidia.com/gpu.clique"] = first.clique
    return labels


def advertised_resources(
    discovery: Discovery, health: Mapping[int, GpuHealth]
) -> tuple[dict[str, str], dict[str, str]]:
    """Capacity and allocatable as NVIDIA's device plugin (mixed MIG strategy) would advertise them.

    Only simulated nodes get these written: on a real node kubelet and the device
    plugin own them. A GPU with MIG enabled is advertised as its slices, not as a
    GPU; an unhealthy GPU (or slice on it) stays in capacity but leaves allocatable.
    """
    whole = [g for g in discovery.gpus if not g.mig_enabled]
    healthy = {i for i in range(len(discovery.gpus)) if health.get(i, HEALTHY).state == "Healthy"}
    slices_all = {g.index: [m.profile for m in g.mig_instances] for g in discovery.gpus if g.mig_enabled}
    slices_ok = {i: s for i, s in slices_all.items() if i in healthy}
    capacity: dict[str, int] = {GPU_RESOURCE: len(whole), **mixed_strategy_resources(slices_all)}
    allocatable: dict[str, int] = {
        GPU_RESOURCE: sum(1 for g in whole if g.index in healthy),
        **mixed_strategy_resources(slices_ok),
    }
    for name in capacity:
        allocatable.setdefault(name, 0)
    return ({k: str(v) for k, v in capacity.items()}, {k: str(v) for k, v in allocatable.items()})
