"""The ``optsched.io/gpu-topology`` node annotation, written by the node agent.

``{"nvlinkIslands": [[0,1,2,3,4,5,6,7]], "numa": [0,0,0,0,1,1,1,1], "unhealthy": [],
"uuids": ["GPU-8f6e...", ...], "pciBusIds": ["00000000:18:00.0", ...]}``: islands are sets of
GPU indices that are all NVLink-connected; every other key is optional, and ``numa``,
``uuids`` and ``pciBusIds`` hold one entry per GPU index (an empty list is the same as none).
Every problem is reported as a ValueError with a message fit for a warning, because one bad
node must never abort a plan. The checks on islands and device ids are shared with the
``NodeGPUs`` reader (:mod:`optsched.snapshot.node_gpus`), which names its own fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

KEYS = ("nvlinkIslands", "numa", "unhealthy", "uuids", "pciBusIds")
"""The annotation's keys; any other is an error naming these."""
MAX_ID_CHARS = 128
"""The longest GPU UUID or PCI bus id read (NVML's are 40 and 16 characters)."""


@dataclass(frozen=True)
class GpuTopology:
    islands: tuple[tuple[int, ...], ...]
    numa: tuple[int, ...]
    unhealthy: frozenset[int]
    uuids: tuple[str, ...] = ()
    """GPU UUID per index; empty where not given."""
    pci_bus_ids: tuple[str, ...] = ()
    """PCI bus id per index; empty where not given."""


def no_nvlink(gpu_count: int) -> GpuTopology:
    """A node without the annotation: every GPU is its own island."""
    return GpuTopology(tuple((i,) for i in range(gpu_count)), (), frozenset())


def index_list(value: object, what: str, gpu_count: int) -> list[int]:
    """``value`` as GPU indices of a node with ``gpu_count`` GPUs; ValueError naming ``what`` if not."""
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ValueError(f"{what} must be a list of GPU indices, got {value!r}")
    for index in value:
        if not 0 <= index < gpu_count:
            raise ValueError(
                f"{what} names GPU {index}, but the node has {gpu_count} GPUs (0..{gpu_count - 1})"
            )
    return value


def checked_islands(islands: Iterable[object], gpu_count: int) -> tuple[tuple[int, ...], ...]:
    """Disjoint islands of GPU indices, every GPU not named standing alone, ordered by first GPU."""
    checked = [tuple(index_list(i, "an NVLink island", gpu_count)) for i in islands]
    seen: set[int] = set()
    for island in checked:
        if seen.intersection(island) or len(set(island)) != len(island):
            twice = sorted(seen.intersection(island)) or [g for g in island if island.count(g) > 1]
            raise ValueError(f"GPU {twice[0]} is in two NVLink islands")
        seen.update(island)
    checked += [(gpu,) for gpu in range(gpu_count) if gpu not in seen]
    return tuple(sorted((tuple(sorted(i)) for i in checked if i), key=lambda i: i[0]))


def id_list(value: object, what: str, gpu_count: int, *, unique: bool) -> tuple[str, ...]:
    """One device id (UUID, PCI bus id) per GPU index; ``[]`` or None is none. ValueError naming ``what``."""
    if value is None or value == []:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings, one per GPU, got {value!r}")
    if len(value) != gpu_count:
        raise ValueError(f"{what} lists {len(value)} GPUs, the node has {gpu_count}")
    for index, text in enumerate(value):
        if not text or len(text) > MAX_ID_CHARS:
            raise ValueError(f"{what}[{index}] must be 1..{MAX_ID_CHARS} characters, got {text[:40]!r}")
        if unique and text in value[:index]:
            raise ValueError(f"{what} names {text!r} twice (GPUs {value.index(text)} and {index})")
    return tuple(value)


def parse_gpu_topology(raw: str, gpu_count: int) -> GpuTopology:
    """Parse and check the annotation against the node's GPU count."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object with 'nvlinkIslands'")
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; expected {', '.join(KEYS)}")
    islands_raw = data.get("nvlinkIslands", [])
    if not isinstance(islands_raw, list):
        raise ValueError("nvlinkIslands must be a list of lists of GPU indices")
    islands = checked_islands(islands_raw, gpu_count)
    numa_raw = data.get("numa", [])
    if not isinstance(numa_raw, list) or not all(isinstance(n, int) for n in numa_raw):
        raise ValueError("numa must be a list of NUMA node numbers, one per GPU")
    if numa_raw and len(numa_raw) != gpu_count:
        raise ValueError(f"numa lists {len(numa_raw)} GPUs, the node has {gpu_count}")
    unhealthy = index_list(data.get("unhealthy", []), "unhealthy", gpu_count)
    return GpuTopology(
        islands,
        tuple(numa_raw),
        frozenset(unhealthy),
        uuids=id_list(data.get("uuids"), "uuids", gpu_count, unique=True),
        pci_bus_ids=id_list(data.get("pciBusIds"), "pciBusIds", gpu_count, unique=False),
    )
