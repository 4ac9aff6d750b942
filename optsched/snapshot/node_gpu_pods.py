"""``NodeGPUs.status.pods``: the GPU devices each pod's containers really hold, by index.

The node agent copies them from kubelet's PodResources: per container the GPU
UUIDs the device plugin handed out (``gpuUUIDs``), the indices it found for
them (``gpuIndices``) and MIG devices (``migUUIDs``, counted through the
``nvidia.com/mig-*`` requests instead). A UUID becomes an index through the
object's own ``status.gpus``; ``gpuIndices`` stand in where a container names
no UUID or one the object does not list. A pod whose devices cannot be placed
that way holds GPUs of unknown index (a warning says so), and a pod listed
without any GPU device is not recorded, so its ``optsched.io/gpus`` annotation
still counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.snapshot.fields import as_list, as_str, describe, get_list, mappings


@dataclass(frozen=True)
class PodDevices:
    """The GPUs one bound pod really holds on its node."""

    namespace: str
    name: str
    indices: tuple[int, ...] | None
    """GPU indices, in the order listed; None where the record cannot place them by index."""
    source: str
    """Where it was read, for messages (``NodeGPUs gpu-node-1``)."""


def _strings(value: Any, *, obj: dict[str, Any], field: str) -> list[str]:
    items = as_list(value, obj=obj, field=field)
    for number, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise InputError(
                f"expected a non-empty string, got {item!r}", obj=describe(obj), field=f"{field}[{number}]"
            )
    return items


def _numbers(value: Any, *, obj: dict[str, Any], field: str) -> list[int]:
    items = as_list(value, obj=obj, field=field)
    for number, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise InputError(
                f"expected a GPU index (a whole number >= 0), got {item!r}",
                obj=describe(obj),
                field=f"{field}[{number}]",
            )
    return items


def _container(
    entry: dict[str, Any], uuids: tuple[str, ...], *, obj: dict[str, Any], where: str
) -> tuple[list[int] | None, str]:
    """A container's GPU indices (None: not placeable by index) and, for that case, why."""
    as_str(entry.get("name"), obj=obj, field=f"{where}.name")
    named = _strings(entry.get("gpuUUIDs"), obj=obj, field=f"{where}.gpuUUIDs")
    listed = _numbers(entry.get("gpuIndices"), obj=obj, field=f"{where}.gpuIndices")
    _strings(entry.get("migUUIDs"), obj=obj, field=f"{where}.migUUIDs")
    missing = [u for u in named if u not in uuids]
    if named and not missing:
        return [uuids.index(u) for u in named], ""
    if listed and len(listed) == len(named or listed) and max(listed) < len(uuids):
        return listed, ""
    if not named and not listed:
        return [], ""
    why = f"GPU {missing[0]}" if missing else f"GPU index {max(listed)}"
    return None, f"{where}: {why} is none of its GPUs"


def _pod(
    entry: dict[str, Any], uuids: tuple[str, ...], *, obj: dict[str, Any], where: str
) -> tuple[str, str, list[int] | None, list[str]]:
    """(namespace, name, GPU indices or None, why unknown) of one ``status.pods`` entry."""
    namespace = as_str(entry.get("namespace"), obj=obj, field=f"{where}.namespace") or "default"
    name = as_str(entry.get("name"), obj=obj, field=f"{where}.name")
    if not name:
        raise InputError("is required but missing", obj=describe(obj), field=f"{where}.name")
    indices: list[int] | None = []
    problems: list[str] = []
    for at, container in mappings(entry.get("containers"), obj=obj, field=f"{where}.containers"):
        held, why = _container(container, uuids, obj=obj, where=at)
        if held is None:
            indices, problems = None, [*problems, why]
        elif indices is not None:
            indices += [i for i in held if i not in indices]
    return namespace, name, indices, problems


def read_pods(
    obj: dict[str, Any], uuids: tuple[str, ...]
) -> tuple[dict[tuple[str, str], PodDevices], list[str]]:
    """The pods listed with GPU devices, by (namespace, name), and a warning per pod not placeable."""
    source = describe(obj)
    out: dict[tuple[str, str], PodDevices] = {}
    warnings = []
    for where, entry in mappings(get_list(obj, "status.pods"), obj=obj, field="status.pods"):
        namespace, name, indices, problems = _pod(entry, uuids, obj=obj, where=where)
        if indices == []:
            continue
        key = (namespace, name)
        before = out.get(key)
        if before is not None and indices is not None:  # listed twice: it holds what both entries say
            indices = (
                None
                if before.indices is None
                else [*before.indices, *(i for i in indices if i not in before.indices)]
            )
        out[key] = PodDevices(namespace, name, None if indices is None else tuple(indices), source)
        if problems:
            warnings.append(
                f"{source}: {'; '.join(problems)}; "
                f"the GPUs of pod {namespace}/{name} count as of unknown index"
            )
    return out, warnings
