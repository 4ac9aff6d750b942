"""What a pod spec asks for, and what bound pods already take on their nodes."""

from __future__ import annotations

import math
from typing import Any

from optsched.errors import InputError
from optsched.model.names import (
    GPU_CORES_RESOURCE,
    GPU_MEM_RESOURCE,
    GPU_RESOURCE,
    GPUS_ANNOTATION,
    MIG_PREFIX,
)
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest
from optsched.snapshot.fields import as_list, as_map, describe
from optsched.snapshot.quantity import count, cpu_milli, memory_mib

_GPU_KEYS = (GPU_RESOURCE, GPU_MEM_RESOURCE, GPU_CORES_RESOURCE)


def _container_requests(container: Any, *, obj: dict[str, Any], field: str) -> dict[str, Any]:
    """Requests, with limits standing in where a request is absent (as the API server defaults them)."""
    entry = as_map(container, obj=obj, field=field)
    resources = as_map(entry.get("resources"), obj=obj, field=f"{field}.resources")
    merged: dict[str, Any] = dict(as_map(resources.get("limits"), obj=obj, field=f"{field}.resources.limits"))
    merged.update(as_map(resources.get("requests"), obj=obj, field=f"{field}.resources.requests"))
    return merged


def _parse(merged: dict[str, Any], *, obj: dict[str, Any], field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in merged.items():
        where = f"{field}.{name}"
        try:
            if name == "cpu":
                out[name] = cpu_milli(value)
            elif name == "memory":
                out[name] = memory_mib(value)
            elif name in _GPU_KEYS or str(name).startswith(MIG_PREFIX):
                out[name] = count(value)
            else:
                continue
        except InputError as exc:
            raise InputError(exc.detail, obj=describe(obj), field=where) from None
        if out[name] < 0:
            raise InputError(f"must not be negative, got {value!r}", obj=describe(obj), field=where)
    return out


def _add_containers(
    totals: dict[str, int], spec: dict[str, Any], key: str, *, obj: dict[str, Any], field: str
) -> None:
    """Containers add up; an init container runs alone, so only the largest one counts."""
    for number, container in enumerate(as_list(spec.get(key), obj=obj, field=f"{field}.{key}")):
        where = f"{field}.{key}[{number}]"
        requests = _parse(
            _container_requests(container, obj=obj, field=where), obj=obj, field=f"{where}.resources"
        )
        for name, value in requests.items():
            totals[name] = (
                totals.get(name, 0) + value if key == "containers" else max(totals.get(name, 0), value)
            )


def pod_request(spec: dict[str, Any], *, obj: dict[str, Any], field: str) -> PodRequest:
    """The effective request of one pod, computed like kube-scheduler does.

    Containers add up; an init container runs alone, so the pod needs the
    larger of the containers' sum and the biggest init container, plus any
    pod overhead. GPUs follow the HAMi share convention: one GPU with
    ``nvidia.com/gpumem`` (MiB) and/or ``nvidia.com/gpucores`` (percent) is a
    share; without them it is a whole device.
    """
    totals: dict[str, int] = {}
    _add_containers(totals, spec, "containers", obj=obj, field=field)
    _add_containers(totals, spec, "initContainers", obj=obj, field=field)
    overhead = as_map(spec.get("overhead"), obj=obj, field=f"{field}.overhead")
    for name, value in _parse(overhead, obj=obj, field=f"{field}.overhead").items():
        totals[name] = totals.get(name, 0) + value
    gpus = totals.get(GPU_RESOURCE, 0)
    gpu_mem = totals.get(GPU_MEM_RESOURCE, 0)
    gpu_cores = totals.get(GPU_CORES_RESOURCE)
    if gpu_cores is not None and not 0 < gpu_cores <= 100:
        raise InputError(
            f"must be a percentage in 1..100, got {gpu_cores}",
            obj=describe(obj),
            field=f"{field}.{GPU_CORES_RESOURCE}",
        )
    share = gpus == 1 and (gpu_mem > 0 or (gpu_cores is not None and gpu_cores < 100))
    milli = FULL_GPU_MILLI
    if share:
        milli = gpu_cores * 10 if gpu_cores is not None else 0
    return PodRequest(
        cpu_milli=totals.get("cpu", 0),
        memory_mib=totals.get("memory", 0),
        gpus=gpus,
        gpu_milli=milli,
        gpu_mem_mib=gpu_mem if share else 0,
        extended={k: v for k, v in totals.items() if k.startswith(MIG_PREFIX) and v},
    )


def gpu_indices(pod: dict[str, Any], gpu_count: int) -> list[int] | None:
    """GPU indices from ``optsched.io/gpus``; None if absent or unusable (then indices are unknown)."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    raw = annotations.get(GPUS_ANNOTATION) if isinstance(annotations, dict) else None
    if not raw:
        return None
    try:
        indices = [int(part) for part in str(raw).split(",") if part.strip()]
    except ValueError:
        return None
    return valid_indices(indices, gpu_count)


def valid_indices(indices: list[int], gpu_count: int) -> list[int] | None:
    """``indices`` if they are distinct GPU indices of the node, else None (indices unknown)."""
    if len(set(indices)) != len(indices) or any(not 0 <= i < gpu_count for i in indices):
        return None
    return indices


def is_terminal(pod: dict[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")


def share_milli_for_usage(request: PodRequest, gpu_memory_mib: int) -> int:
    """Compute taken by a bound share; a memory-only share is counted by its memory fraction."""
    if request.gpu_milli:
        return request.gpu_milli
    if gpu_memory_mib:
        return min(FULL_GPU_MILLI, math.ceil(request.gpu_mem_mib * FULL_GPU_MILLI / gpu_memory_mib))
    return 0
