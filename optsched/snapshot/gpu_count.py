"""How many GPU indices a node has when some of its GPUs are unhealthy.

kubelet takes a GPU NVIDIA's device plugin reports unhealthy out of
``status.allocatable`` but leaves it in ``status.capacity``: an 8-GPU board
with GPU 3 broken advertises 7 allocatable GPUs, still numbered 0..7. Where
the node's NodeGPUs or ``optsched.io/gpu-topology`` annotation names at least
as many unhealthy GPUs as allocatable falls short of capacity, the indices are
capacity's and the unhealthy ones are kept out by index; otherwise (a
shortfall nobody explains) allocatable's count stands, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optsched.errors import InputError
from optsched.model.names import GPU_RESOURCE, GPU_TOPOLOGY_ANNOTATION
from optsched.snapshot.fields import get_map
from optsched.snapshot.node_gpus import NodeGpuFacts
from optsched.snapshot.quantity import count
from optsched.topology.gpu_topology import parse_gpu_topology


def gpu_index_space(
    obj: dict[str, Any],
    allocatable: int,
    facts: NodeGpuFacts | None,
    annotations: Mapping[str, str],
    limit: int,
) -> int:
    raw = get_map(obj, "status.capacity").get(GPU_RESOURCE)
    if raw is None:
        return allocatable
    try:
        capacity = count(raw)
    except InputError:
        return allocatable
    if not allocatable < capacity <= limit:
        return allocatable
    return capacity if capacity - allocatable <= _unhealthy(capacity, facts, annotations) else allocatable


def _unhealthy(capacity: int, facts: NodeGpuFacts | None, annotations: Mapping[str, str]) -> int:
    if facts is not None:
        return len(facts.topology.unhealthy) if facts.gpu_count == capacity else 0
    raw = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    if raw is None:
        return 0
    try:
        return len(parse_gpu_topology(raw, capacity).unhealthy)
    except ValueError:
        return 0
