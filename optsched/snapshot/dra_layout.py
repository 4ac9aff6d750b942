"""A DRA node's GPUs by index: the ResourceSlice's devices joined to the node agent's topology by UUID.

NVIDIA's DRA driver names devices by minor number and publishes no index;
the node agent (NodeGPUs, else the ``optsched.io/gpu-topology`` annotation)
knows each GPU's index, NVLink island, NUMA node and health, keyed by UUID.
Where the agent names UUIDs, a slice device takes the agent's index for its
UUID and the agent's island, NUMA and health with it; a GPU the agent reports
but the slice lacks (the driver left it out as unhealthy) keeps its index but
is not planned; a slice device the agent does not know comes after the
agent's GPUs, alone in its island. Without agent UUIDs the devices are
numbered in order of their minor number, with no NVLink (an index of the
agent cannot be matched to a device without its UUID).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from optsched.model.names import GPU_TOPOLOGY_ANNOTATION
from optsched.snapshot.dra import DraDevice, DraNode
from optsched.snapshot.node_gpus import NodeGpuFacts
from optsched.topology.gpu_topology import GpuTopology, checked_islands, no_nvlink, parse_gpu_topology


@dataclass(frozen=True)
class DraLayout:
    """What a DRA node's Node carries about its GPUs."""

    gpu_count: int
    topology: GpuTopology
    product: str = ""
    memory_mib: int = 0


def _agent_topology(
    name: str, facts: NodeGpuFacts | None, annotations: Mapping[str, str]
) -> tuple[GpuTopology | None, list[str]]:
    """The agent's topology with UUIDs (NodeGPUs first, else the annotation); None where none names UUIDs."""
    if facts is not None and facts.topology.uuids:
        return facts.topology, []
    raw = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    if raw is None:
        return None, []
    try:
        data = json.loads(raw)
        uuids = data.get("uuids") if isinstance(data, dict) else None
        topology = parse_gpu_topology(raw, len(uuids)) if isinstance(uuids, list) and uuids else None
    except ValueError as exc:
        return None, [f"Node {name}: annotation {GPU_TOPOLOGY_ANNOTATION} is malformed ({exc}); not used"]
    if topology is None:
        return None, [
            f"Node {name}: annotation {GPU_TOPOLOGY_ANNOTATION} names no GPU UUIDs, so its indices cannot be "
            "matched to the ResourceSlice's devices; not used (no NVLink)"
        ]
    return topology, []


def _product_and_memory(name: str, devices: tuple[DraDevice, ...]) -> tuple[str, int, list[str]]:
    products = Counter(d.product for d in devices if d.product)
    product = products.most_common(1)[0][0] if products else ""
    notes = []
    if len(products) > 1:
        notes.append(
            f"Node {name}: its ResourceSlice lists GPUs of several products ({', '.join(sorted(products))}); "
            f"planned as {product}"
        )
    memories = [d.memory_mib for d in devices if d.memory_mib]
    return product, min(memories, default=0), notes


def _joined(
    name: str, devices: tuple[DraDevice, ...], agent: GpuTopology
) -> tuple[int, GpuTopology, list[str]]:
    published = {d.uuid for d in devices}
    extra = [d for d in devices if d.uuid not in agent.uuids]
    count = len(agent.uuids) + len(extra)
    missing = frozenset(i for i, uuid in enumerate(agent.uuids) if uuid not in published)
    notes = []
    if extra:
        notes.append(
            f"Node {name}: its node agent does not report the GPUs {', '.join(d.uuid for d in extra)} of its "
            "ResourceSlice; they are planned without NVLink or NUMA"
        )
    pci = (*agent.pci_bus_ids, *(d.pci_bus_id for d in extra)) if agent.pci_bus_ids else ()
    topology = GpuTopology(
        islands=checked_islands([list(island) for island in agent.islands], count),
        numa=agent.numa if not extra else (),
        unhealthy=agent.unhealthy | missing,
        uuids=(*agent.uuids, *(d.uuid for d in extra)),
        pci_bus_ids=pci if all(pci) else (),
    )
    return count, topology, notes


def dra_layout(
    name: str, dra: DraNode, facts: NodeGpuFacts | None, annotations: Mapping[str, str]
) -> tuple[DraLayout, list[str]]:
    """The GPUs of DRA node ``name`` by index, and warnings on what could not be joined."""
    if dra.problem:
        note = f"Node {name}: {dra.problem}; none of its GPUs are planned"
        return DraLayout(0, no_nvlink(0)), [note]
    product, memory, notes = _product_and_memory(name, dra.devices)
    agent, agent_notes = _agent_topology(name, facts, annotations)
    notes += agent_notes
    if agent is None:
        devices = dra.devices
        pci = tuple(d.pci_bus_id for d in devices)
        topology = GpuTopology(
            islands=no_nvlink(len(devices)).islands,
            numa=(),
            unhealthy=frozenset(),
            uuids=tuple(d.uuid for d in devices),
            pci_bus_ids=pci if all(pci) else (),
        )
        return DraLayout(len(devices), topology, product, memory), notes
    count, topology, join_notes = _joined(name, dra.devices, agent)
    return DraLayout(count, topology, product, memory), notes + join_notes
