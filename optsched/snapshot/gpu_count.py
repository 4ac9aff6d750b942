"""How many GPU indices a node has when some of its GPUs are unhealthy.

kubelet takes a GPU NVIDIA's device plugin reports unhealthy out of
``status.allocatable`` but leaves it in ``status.capacity``: an 8-GPU board
with GPU 3 broken advertises 7 allocatable GPUs, still numbered 0..7. Where
the node's NodeGPUs or ``optsched.io/gpu-topology`` annotation names at least
as many unhealthy GPUs as allocatable falls short of capacity, the indices are
capacity's and the unhealthy ones are kept out by index; otherwise (a
shortfall nobody explains) allocatable's count stands, as before. A GPU with
MIG enabled is the same case: NVIDIA's device plugin (mixed strategy)
advertises its slices, not the GPU, so a NodeGPUs listing it keeps its index
and whole-GPU placement skips it.
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
    """The node's GPU indices: all it has where the GPUs it lacks in allocatable are accounted for."""
    total = facts.gpu_count if facts is not None else _capacity(obj)
    if total is None or not allocatable < total <= limit:
        return allocatable
    return total if total - allocatable <= _unusable(total, facts, annotations) else allocatable


def _capacity(obj: dict[str, Any]) -> int | None:
    raw = get_map(obj, "status.capacity").get(GPU_RESOURCE)
    if raw is None:
        return None
    try:
        return count(raw)
    except InputError:
        return None


def _unusable(total: int, facts: NodeGpuFacts | None, annotations: Mapping[str, str]) -> int:
    if facts is not None:
        return len(facts.topology.unhealthy)
    raw = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    if raw is None:
        return 0
    try:
        return len(parse_gpu_topology(raw, total).unhealthy)
    except ValueError:
        return 0
