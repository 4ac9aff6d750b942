"""The ungater, pure part: which gated pod takes which planned slot, and the patch that pins it.

A pod of an admitted workload is created with our scheduling gate. It is
matched to one slot of its PodSet's placement record:

* an indexed Job's pod takes the slot of its completion index
  (``batch.kubernetes.io/job-completion-index``);
* any other pod takes the lowest free slot, pods ordered by creation time and
  name, so the assignment is stable across cycles and restarts.

A slot is taken when a live pod of the same plan already carries its index
in ``optsched.io/pod-index``; that annotation is written in the same patch as
the pin, so a slot can never be handed to two pods, whatever crashes between
cycles. The patch is one JSON merge patch carrying the pod's
``resourceVersion``: it adds ``nodeSelector kubernetes.io/hostname`` (allowed
on a gated pod), the GPU and index annotations, and drops our gate; a
concurrent change makes it fail with 409 and the next cycle retries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.inputs import completion_index, pod_set_of
from optsched.controller.records import PlacementRecord, RecordError, record_of
from optsched.kueue import workload_status as ks
from optsched.model.names import (
    GPUS_ANNOTATION,
    HOSTNAME_LABEL,
    PLAN_ID_LABEL,
    POD_INDEX_ANNOTATION,
    SCHEDULING_GATE,
)
from optsched.model.placement import PodPlacement


@dataclass(frozen=True)
class PodPin:
    namespace: str
    name: str
    resource_version: str
    plan_id: str
    pod_set: str
    slot: PodPlacement
    remaining_gates: tuple[dict[str, Any], ...]

    def patch(self) -> dict[str, Any]:
        """JSON merge patch: pin to the node, record GPUs and slot, remove our gate."""
        annotations = {POD_INDEX_ANNOTATION: str(self.slot.index)}
        if self.slot.gpus is not None:
            annotations[GPUS_ANNOTATION] = ",".join(str(g) for g in self.slot.gpus)
        metadata: dict[str, Any] = {"annotations": annotations}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {
            "metadata": metadata,
            "spec": {
                "nodeSelector": {HOSTNAME_LABEL: self.slot.node},
                "schedulingGates": [dict(g) for g in self.remaining_gates] or None,
            },
        }


def gates_of(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [g for g in gates if isinstance(g, dict)]


def is_gated_by_us(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == SCHEDULING_GATE for g in gates_of(pod))


def _live(pod: Mapping[str, Any]) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    return not ks.meta(pod).get("deletionTimestamp")


def _slot_index(pod: Mapping[str, Any]) -> int | None:
    raw = (ks.meta(pod).get("annotations") or {}).get(POD_INDEX_ANNOTATION)
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


@dataclass
class PinResult:
    pins: list[PodPin]
    waiting: list[str]
    """Gated pods that could not be matched to a free slot (``namespace/name: why``)."""


def pins_for(pods: Iterable[Mapping[str, Any]], records: Mapping[str, PlacementRecord]) -> PinResult:
    """Pins for every pod gated by us whose plan id names one of ``records`` (keyed by plan id).

    ``pods`` must hold every live pod carrying the plan-id label (gated or
    not, bound or not), so that taken slots are seen.
    """
    by_group: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    waiting: list[str] = []
    for pod in pods:
        plan_id = (ks.meta(pod).get("labels") or {}).get(PLAN_ID_LABEL)
        if not plan_id or plan_id not in records or not _live(pod):
            continue
        pod_set = pod_set_of(pod)
        record = records[plan_id]
        if pod_set is None and len(record.pod_sets) == 1:
            pod_set = next(iter(record.pod_sets))
        if pod_set is None or pod_set not in record.pod_sets:
            if is_gated_by_us(pod):
                waiting.append(f"{ks.key_of(pod)}: PodSet {pod_set!r} is not in placement {plan_id}")
            continue
        by_group.setdefault((plan_id, pod_set), []).append(pod)
    pins: list[PodPin] = []
    for (plan_id, pod_set), group in sorted(by_group.items()):
        slots = {s.index: s for s in records[plan_id].slots(pod_set)}
        taken = {i for p in group if not is_gated_by_us(p) and (i := _slot_index(p)) is not None}
        gated = sorted(
            (p for p in group if is_gated_by_us(p)),
            key=lambda p: (str(ks.meta(p).get("creationTimestamp", "")), str(ks.meta(p).get("name", ""))),
        )
        unindexed = []
        for pod in gated:
            index = completion_index(pod)
            if index is not None and index in slots and index not in taken:
                taken.add(index)
                pins.append(_pin(pod, plan_id, pod_set, slots[index]))
            else:
                unindexed.append(pod)
        free = [slots[i] for i in sorted(slots) if i not in taken]
        for pod, slot in zip(unindexed, free, strict=False):
            pins.append(_pin(pod, plan_id, pod_set, slot))
        for pod in unindexed[len(free) :]:
            waiting.append(f"{ks.key_of(pod)}: every planned slot of PodSet {pod_set} is taken")
    return PinResult(pins=pins, waiting=waiting)


def _pin(pod: Mapping[str, Any], plan_id: str, pod_set: str, slot: PodPlacement) -> PodPin:
    m = ks.meta(pod)
    return PodPin(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        resource_version=str(m.get("resourceVersion", "")),
        plan_id=plan_id,
        pod_set=pod_set,
        slot=slot,
        remaining_gates=tuple(g for g in gates_of(pod) if g.get("name") != SCHEDULING_GATE),
    )


def ready_records(
    workloads: Iterable[Mapping[str, Any]], check_names: Iterable[str]
) -> dict[str, PlacementRecord]:
    """Records of unfinished workloads whose check is Ready, by plan id: the pods that may be pinned."""
    names = frozenset(check_names)
    out: dict[str, PlacementRecord] = {}
    for workload in workloads:
        entry = ks.check_entry(workload, names)
        if entry is None or entry.state != "Ready" or ks.is_finished(workload):
            continue
        try:
            record = record_of(workload)
        except RecordError:
            continue
        if record is not None:
            out[record.plan_id] = record
    return out
