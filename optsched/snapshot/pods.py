"""What a pod spec asks for, and what bound pods already take on their nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError
from optsched.model.names import (
    GPU_CORES_RESOURCE,
    GPU_MEM_PERCENT_RESOURCE,
    GPU_MEM_RESOURCE,
    GPU_RESOURCE,
    GPUS_ANNOTATION,
    MIG_PREFIX,
)
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest
from optsched.snapshot.fields import as_map, describe
from optsched.snapshot.quantity import count, cpu_milli, memory_mib

_SHARE_KEYS = (GPU_MEM_RESOURCE, GPU_CORES_RESOURCE, GPU_MEM_PERCENT_RESOURCE)
_GPU_KEYS = (GPU_RESOURCE, *_SHARE_KEYS)


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


@dataclass
class _Devices:
    """A pod's GPU devices, read container by container as HAMi reads them.

    Each container asks for ``nvidia.com/gpu`` devices, each a share where it
    also names memory (``gpumem``, else ``gpumem-percentage`` below 100) or
    cores below 100. A container that names share resources but no GPU count
    gets one device (HAMi's ``defaultGPUNum``); one asking for 0 GPUs gets none. The pod's devices are
    shares only if every GPU container's are; each then asks for the largest
    memory and cores any container names, so the pod never gets less than a
    container needs.
    """

    count: int = 0
    init: int = 0
    whole: bool = False
    mem: int = 0
    percent: int = 0
    cores: int | None = None

    def add(self, asked: dict[str, int], *, init: bool, obj: dict[str, Any], field: str) -> None:
        devices = asked.get(GPU_RESOURCE, 0)
        if GPU_RESOURCE not in asked and any(key in asked for key in _SHARE_KEYS):
            devices = 1
        if not devices:
            return
        for key in (GPU_CORES_RESOURCE, GPU_MEM_PERCENT_RESOURCE):
            if key in asked and not 0 < asked[key] <= 100:
                raise InputError(
                    f"must be a percentage in 1..100, got {asked[key]}",
                    obj=describe(obj),
                    field=f"{field}.{key}",
                )
        if init:
            self.init = max(self.init, devices)
        else:
            self.count += devices
        mem = asked.get(GPU_MEM_RESOURCE, 0)
        percent = None if mem else asked.get(GPU_MEM_PERCENT_RESOURCE)  # HAMi: gpumem wins
        cores = asked.get(GPU_CORES_RESOURCE)
        if not (mem or (percent is not None and percent < 100) or (cores is not None and cores < 100)):
            self.whole = True
            return
        self.mem = max(self.mem, mem)
        self.percent = max(self.percent, percent or 0)
        if cores is not None:
            self.cores = max(self.cores or 0, cores)

    def request_fields(self) -> dict[str, int]:
        """The GPU fields of the pod's :class:`PodRequest`."""
        gpus = max(self.count, self.init)
        if self.whole or not (self.mem or self.percent or self.cores is not None):
            return {"gpus": gpus}
        milli = self.cores * FULL_GPU_MILLI // 100 if self.cores is not None else 0
        return {"gpus": gpus, "gpu_milli": milli, "gpu_mem_mib": self.mem, "gpu_mem_percent": self.percent}


def pod_request(spec: dict[str, Any], *, obj: dict[str, Any], field: str) -> PodRequest:
    """The effective request of one pod, computed like kube-scheduler does.

    Containers add up; an init container runs alone, so the pod needs the
    larger of the containers' sum and the biggest init container, plus any
    pod overhead. GPUs follow HAMi's meaning (:class:`_Devices`):
    ``nvidia.com/gpu: N`` with ``nvidia.com/gpumem`` (MiB),
    ``nvidia.com/gpumem-percentage`` and/or ``nvidia.com/gpucores`` (percent)
    is N shares, each on a different GPU; without them, N whole devices.
    """
    totals: dict[str, int] = {}
    gpu_containers = 0
    devices = _Devices()
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise InputError("containers must be a list", obj=describe(obj), field=f"{field}.containers")
    for kind, init, listed in (
        ("containers", False, containers),
        ("initContainers", True, spec.get("initContainers")),
    ):
        for number, container in enumerate(listed or []):
            where = f"{field}.{kind}[{number}].resources"
            asked = _parse(_container_requests(container, obj=obj, field=where), obj=obj, field=where)
            devices.add(asked, init=init, obj=obj, field=where)
            gpu_containers += int(not init and asked.get(GPU_RESOURCE, 0) > 0)
            for name, value in asked.items():
                totals[name] = max(totals.get(name, 0), value) if init else totals.get(name, 0) + value
    for name, value in _parse(spec.get("overhead") or {}, obj=obj, field=f"{field}.overhead").items():
        totals[name] = totals.get(name, 0) + value
    gpu = devices.request_fields()
    return PodRequest(
        cpu_milli=totals.get("cpu", 0),
        memory_mib=totals.get("memory", 0),
        **gpu,
        listed={k: totals[k] for k in _SHARE_KEYS if totals.get(k)},
        extended={k: v for k, v in totals.items() if k.startswith(MIG_PREFIX) and v},
        split_gpus=gpu_containers > 1,
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
        memory = request.share_memory(gpu_memory_mib)
        return min(FULL_GPU_MILLI, math.ceil(memory * FULL_GPU_MILLI / gpu_memory_mib))
    return 0
