"""The ``optsched.io/gpu-topology`` node annotation, written by the node agent.

``{"nvlinkIslands": [[0,1,2,3,4,5,6,7]], "numa": [0,0,0,0,1,1,1,1], "unhealthy": []}``:
islands are sets of GPU indices that are all NVLink-connected; ``numa`` and
``unhealthy`` are optional. Every problem is reported as a ValueError with a
message fit for a warning, because one bad node must never abort a plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuTopology:
    islands: tuple[tuple[int, ...], ...]
    numa: tuple[int, ...]
    unhealthy: frozenset[int]


def no_nvlink(gpu_count: int) -> GpuTopology:
    """A node without the annotation: every GPU is its own island."""
    return GpuTopology(tuple((i,) for i in range(gpu_count)), (), frozenset())


def _index_list(value: object, what: str, gpu_count: int) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ValueError(f"{what} must be a list of GPU indices, got {value!r}")
    for index in value:
        if not 0 <= index < gpu_count:
            raise ValueError(
                f"{what} names GPU {index}, but the node has {gpu_count} GPUs (0..{gpu_count - 1})"
            )
    return value


def parse_gpu_topology(raw: str, gpu_count: int) -> GpuTopology:
    """Parse and check the annotation against the node's GPU count."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object with 'nvlinkIslands'")
    unknown = set(data) - {"nvlinkIslands", "numa", "unhealthy"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; expected nvlinkIslands, numa, unhealthy")
    islands_raw = data.get("nvlinkIslands", [])
    if not isinstance(islands_raw, list):
        raise ValueError("nvlinkIslands must be a list of lists of GPU indices")
    islands = [tuple(_index_list(i, "an NVLink island", gpu_count)) for i in islands_raw]
    seen: set[int] = set()
    for island in islands:
        if seen.intersection(island):
            raise ValueError(f"GPU {sorted(seen.intersection(island))[0]} is in two NVLink islands")
        seen.update(island)
    for gpu in range(gpu_count):
        if gpu not in seen:
            islands.append((gpu,))
    numa_raw = data.get("numa", [])
    if not isinstance(numa_raw, list) or not all(isinstance(n, int) for n in numa_raw):
        raise ValueError("numa must be a list of NUMA node numbers, one per GPU")
    if numa_raw and len(numa_raw) != gpu_count:
        raise ValueError(f"numa lists {len(numa_raw)} GPUs, the node has {gpu_count}")
    unhealthy = _index_list(data.get("unhealthy", []), "unhealthy", gpu_count)
    ordered = tuple(sorted((tuple(sorted(i)) for i in islands if i), key=lambda i: i[0]))
    return GpuTopology(ordered, tuple(numa_raw), frozenset(unhealthy))
