"""Drift: a pod holds other GPUs than its plan gave it.

On a device-plugin node optsched pins a pod to its node and predicts which
GPUs NVIDIA's device plugin will pick; the plan writes them in the pod's
``optsched.io/gpus`` annotation. kubelet's PodResources says what the pod
really got. When the two differ the plan was wrong about that node: the
agent reports it (an Event, a metric) and the next plan counts the GPUs the
pod really holds. A pod with a plan that holds no GPUs yet (not started, or
its devices not yet listed) is not drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optsched.agent.podresources import PodDevices
from optsched.model.names import GPU_RESOURCE, GPUS_ANNOTATION

PodKey = tuple[str, str]
"""(namespace, name)"""


@dataclass(frozen=True)
class Drift:
    """One pod whose held GPUs are not the ones planned (both ascending GPU indices)."""

    namespace: str
    name: str
    planned: tuple[int, ...]
    held: tuple[int, ...]


def planned_indices(pod: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The GPU indices (ascending) a Pod object's ``optsched.io/gpus`` annotation plans, e.g. ``"0,1,2,3"``.

    None when the pod has no such annotation or it cannot be read: an empty
    list, a part that is not a whole non-negative number, a repeated index.
    Spaces and empty parts (``"0, 1,"``) are tolerated.
    """
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    raw = annotations.get(GPUS_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(raw, str):
        return None
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts or not all(part.isascii() and part.isdigit() for part in parts):
        return None
    indices = [int(part) for part in parts]
    if len(set(indices)) != len(indices):
        return None
    return tuple(sorted(indices))


def held_indices(
    pods: Sequence[PodDevices], uuid_to_index: Mapping[str, int]
) -> dict[PodKey, tuple[int, ...]]:
    """The whole GPUs (ascending indices) each pod holds, for pods that hold at least one.

    Only ``nvidia.com/gpu`` devices count; an ID the node does not know as a
    GPU UUID (a MIG device, a GPU gone from discovery) is left out.
    """
    held: dict[PodKey, set[int]] = {}
    for pod in pods:
        for container in pod.containers:
            for device in container.ids(GPU_RESOURCE):
                if device in uuid_to_index:
                    held.setdefault((pod.namespace, pod.name), set()).add(uuid_to_index[device])
    return {key: tuple(sorted(indices)) for key, indices in held.items()}


def find_drift(
    planned: Mapping[PodKey, tuple[int, ...]], held: Mapping[PodKey, tuple[int, ...]]
) -> list[Drift]:
    """Every planned pod that holds GPUs, but not the planned set; ordered by namespace and name."""
    out = []
    for key in sorted(planned):
        got = held.get(key)
        if not got or set(got) == set(planned[key]):
            continue
        out.append(Drift(key[0], key[1], tuple(sorted(planned[key])), tuple(sorted(got))))
    return out
