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
concurrent change makes it fail with 409 and the pin is retried on a fresh read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.records import PlacementRecord
from optsched.controller.views import PodView, WorkloadView
from optsched.kueue import workload_status as ks
from optsched.model.names import GPUS_ANNOTATION, HOSTNAME_LABEL, POD_INDEX_ANNOTATION, SCHEDULING_GATE
from optsched.model.placement import PodPlacement
from optsched.model.snapshot import CheckState


@dataclass(frozen=True)
class PodPin:
    namespace: str
    name: str
    resource_version: str
    plan_id: str
    pod_set: str
    slot: PodPlacement
    remaining_gates: tuple[str, ...]
    """The pod's other scheduling gates, kept."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

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
                "schedulingGates": [{"name": g} for g in self.remaining_gates] or None,
            },
        }


@dataclass(frozen=True)
class PinResult:
    pins: tuple[PodPin, ...] = ()
    waiting: tuple[str, ...] = ()
    """Gated pods that could not be matched to a free slot (``namespace/name: why``)."""


def _groups(
    pods: Iterable[PodView], records: Mapping[str, PlacementRecord]
) -> tuple[dict[tuple[str, str], list[PodView]], list[str]]:
    """Live pods of known plans by (plan id, PodSet), and why gated pods of an unknown PodSet wait."""
    groups: dict[tuple[str, str], list[PodView]] = {}
    waiting: list[str] = []
    for pod in pods:
        if not pod.plan_id or pod.plan_id not in records or not pod.live:
            continue
        record = records[pod.plan_id]
        pod_set = pod.pod_set
        if pod_set is None and len(record.pod_sets) == 1:
            pod_set = next(iter(record.pod_sets))
        if pod_set is None or pod_set not in record.pod_sets:
            if pod.gated_by_us:
                waiting.append(f"{pod.key}: PodSet {pod_set!r} is not in placement {pod.plan_id}")
            continue
        groups.setdefault((pod.plan_id, pod_set), []).append(pod)
    return groups, waiting


def pins_for(pods: Iterable[PodView], records: Mapping[str, PlacementRecord]) -> PinResult:
    """Pins for every pod gated by us whose plan id names one of ``records`` (keyed by plan id).

    ``pods`` must hold every live pod carrying the plan-id label (gated or
    not, bound or not), so that taken slots are seen.
    """
    groups, waiting = _groups(pods, records)
    pins: list[PodPin] = []
    for (plan_id, pod_set), group in sorted(groups.items()):
        slots = {s.index: s for s in records[plan_id].slots(pod_set)}
        taken = {p.slot_index for p in group if not p.gated_by_us and p.slot_index is not None}
        gated = sorted((p for p in group if p.gated_by_us), key=lambda p: (p.created, p.name))
        unindexed = []
        for pod in gated:
            index = pod.completion_index
            if index is not None and index in slots and index not in taken:
                taken.add(index)
                pins.append(_pin(pod, plan_id, pod_set, slots[index]))
            else:
                unindexed.append(pod)
        free = [slots[i] for i in sorted(slots) if i not in taken]
        pins += [_pin(pod, plan_id, pod_set, slot) for pod, slot in zip(unindexed, free, strict=False)]
        waiting += [
            f"{p.key}: every planned slot of PodSet {pod_set} is taken" for p in unindexed[len(free) :]
        ]
    return PinResult(pins=tuple(pins), waiting=tuple(waiting))


def _pin(pod: PodView, plan_id: str, pod_set: str, slot: PodPlacement) -> PodPin:
    return PodPin(
        namespace=pod.namespace,
        name=pod.name,
        resource_version=pod.resource_version,
        plan_id=plan_id,
        pod_set=pod_set,
        slot=slot,
        remaining_gates=tuple(g for g in pod.gates if g != SCHEDULING_GATE),
    )


def ready_records(workloads: Iterable[WorkloadView]) -> dict[str, PlacementRecord]:
    """Records of unfinished workloads whose check is Ready, by plan id: the pods that may be pinned."""
    out: dict[str, PlacementRecord] = {}
    for view in workloads:
        ready = view.check is not None and view.check.state == CheckState.READY
        if ready and view.lifecycle != ks.Lifecycle.FINISHED and view.record is not None:
            out[view.record.plan_id] = view.record
    return out
