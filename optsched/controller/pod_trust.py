"""What a pod says about its own GPUs counts only where optsched put it there.

``optsched.io/gpus`` and ``optsched.io/pod-index`` are ordinary annotations:
anyone who may edit a pod may write them, and a tenant who declares GPUs
4-7 on a pod the device plugin gave 0-3 would steer the next plan onto busy
GPUs. The admission policy shipped with optsched denies such writes, and the
controller does not rely on it alone: before the snapshot is built, each
pod's annotations are replaced by what the placement record says of the
slot the pod was pinned to, and dropped from every pod that is not one of a
recorded workload's pods (its GPUs then count with unknown indices, which
never promises an index twice).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from optsched.controller.views import PodView, WorkloadView, belongs, pod_set_in, read_pod
from optsched.kueue import workload_status as ks
from optsched.model.names import GPUS_ANNOTATION, POD_INDEX_ANNOTATION
from optsched.model.placement import PodPlacement

_OURS = (GPUS_ANNOTATION, POD_INDEX_ANNOTATION)


def recorded_slot(pod: PodView, view: WorkloadView) -> PodPlacement | None:
    """The slot of the workload's record the pod was pinned to, if the pod is one of its pods."""
    record = view.record
    if record is None or pod.slot_index is None or not belongs(pod, view):
        return None
    pod_set = pod_set_in(pod, record) or ""
    return next((s for s in record.slots(pod_set) if s.index == pod.slot_index), None)


def _trusted_annotations(annotations: Mapping[str, Any], slot: PodPlacement | None) -> dict[str, Any]:
    out = {k: v for k, v in annotations.items() if k not in _OURS}
    if slot is not None:
        out[POD_INDEX_ANNOTATION] = str(slot.index)
        if slot.gpus is not None:
            out[GPUS_ANNOTATION] = ",".join(str(g) for g in slot.gpus)
    return out


def trusted_pod_objects(
    objects: Iterable[dict[str, Any]], views: Iterable[WorkloadView]
) -> list[dict[str, Any]]:
    """``objects`` with every pod's GPU and slot annotations as the records say (copies where changed)."""
    recorded = {(v.namespace, v.record.plan_id): v for v in views if v.record is not None}
    out: list[dict[str, Any]] = []
    for obj in objects:
        annotations = ks.map_or_empty(ks.meta(obj).get("annotations"))
        if obj.get("kind") != "Pod" or not any(k in annotations for k in _OURS):
            out.append(obj)
            continue
        pod = read_pod(obj)
        view = recorded.get((pod.namespace, pod.plan_id or ""))
        slot = recorded_slot(pod, view) if view is not None else None
        trusted = _trusted_annotations(annotations, slot)
        if trusted == annotations:
            out.append(obj)
            continue
        changed = copy.copy(obj)
        changed["metadata"] = {**ks.meta(obj), "annotations": trusted}
        out.append(changed)
    return out
