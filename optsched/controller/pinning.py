"""The ungater, pure part: which gated pod takes which planned slot, and the patch that pins it.

A pod of an admitted workload is created with our scheduling gate. It is
matched to its Workload by namespace, plan id and owner (:func:`views.belongs`:
a plan id copied onto another tenant's pod takes nothing), then to one slot
of its PodSet's placement record:

* an indexed Job's pod takes the slot of its completion index
  (``batch.kubernetes.io/job-completion-index``);
* any other pod takes the lowest free slot, pods ordered by creation time and
  name, so the assignment is stable across cycles and restarts.

A slot is taken when a live pod of the same plan already carries its index
in ``optsched.io/pod-index``; that annotation is written in the same patch as
the pin, so a slot can never be handed to two pods, whatever crashes between
cycles. The patch is one JSON merge patch carrying the pod's
``resourceVersion``: it adds ``nodeSelector kubernetes.io/hostname`` (the
node's own hostname label, which may differ from its name; allowed on a
gated pod), the GPU and index annotations, and drops our gate; a concurrent
change makes it fail with 409 and the pin is retried on a fresh read.

A pod whose GPUs the webhook moved onto an optsched ResourceClaim (DRA
mode) is pinned with the claim its slot needs (:class:`~optsched.controller.claims.ClaimPlan`),
created before the pod is ungated; one whose claim is named after its
completion index waits when that slot is taken, one whose claim is not a
name optsched gives that PodSet's pods waits too (nothing is created or
deleted for it). A pod without a claim is kept off DRA slots while a
device-plugin slot is free, and pinned to one only when kube-scheduler's
first-fit cannot take another slot's planned devices
(:mod:`optsched.controller.first_fit`).

Pods of pod-based integrations are gated at creation by their queue name,
before anyone knows whether the queue is ours; once it is known not to be,
:func:`ungates_for` lifts our gate and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.controller.claims import ClaimForm, ClaimPlan, claim_form, requests_for
from optsched.controller.dra_webhook import on_dra
from optsched.controller.first_fit import FirstFitGuard
from optsched.controller.views import PodView, WorkloadView, belongs, pod_set_in
from optsched.kueue import workload_status as ks
from optsched.kueue.managed_queues import ManagedQueues
from optsched.model.names import (
    GPU_UUIDS_ANNOTATION,
    GPUS_ANNOTATION,
    HOSTNAME_LABEL,
    PINNED_AT_ANNOTATION,
    POD_INDEX_ANNOTATION,
    SCHEDULING_GATE,
)
from optsched.model.placement import Enforcement, PodPlacement
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
    hostname: str = ""
    """The node's ``kubernetes.io/hostname`` label (its name where empty)."""
    ungate_only: bool = False
    """Lift our gate and nothing else (a pod of a queue that is not ours)."""
    pinned_at: str = ""
    """When the pin is made (RFC 3339), written to ``optsched.io/pinned-at``."""
    claim: ClaimPlan | None = None
    """The ResourceClaim to create before the pod is ungated (the pod names it: DRA mode)."""

    @property
    def enforcement(self) -> Enforcement:
        """How the pod's GPUs are enforced once it is pinned."""
        if self.claim is not None:
            return Enforcement.DRA
        return Enforcement.PREDICTED if self.slot.enforcement == Enforcement.PREDICTED else Enforcement.NONE

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def patch(self) -> dict[str, Any]:
        """JSON merge patch: pin to the node, record GPUs and slot, remove our gate."""
        gates = [{"name": g} for g in self.remaining_gates] or None
        if self.ungate_only:
            return {
                "metadata": {"resourceVersion": self.resource_version},
                "spec": {"schedulingGates": gates},
            }
        annotations = {POD_INDEX_ANNOTATION: str(self.slot.index)}
        if self.pinned_at:
            annotations[PINNED_AT_ANNOTATION] = self.pinned_at
        if self.slot.gpus is not None:
            annotations[GPUS_ANNOTATION] = ",".join(str(g) for g in self.slot.gpus)
        if self.slot.gpu_uuids:
            annotations[GPU_UUIDS_ANNOTATION] = ",".join(self.slot.gpu_uuids)
        metadata: dict[str, Any] = {"annotations": annotations}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {
            "metadata": metadata,
            "spec": {
                "nodeSelector": {HOSTNAME_LABEL: self.hostname or self.slot.node},
                "schedulingGates": gates,
            },
        }


@dataclass(frozen=True)
class PinResult:
    pins: tuple[PodPin, ...] = ()
    waiting: tuple[str, ...] = ()
    """Gated pods that could not be matched to a free slot (``namespace/name: why``)."""


Records = Mapping[tuple[str, str], WorkloadView]
"""Ready workloads with a record, by namespace and plan id."""


def _groups(
    pods: Iterable[PodView], records: Records
) -> tuple[dict[tuple[str, str, str], list[PodView]], list[str]]:
    """Live pods of known workloads by (namespace, plan id, PodSet), and why gated pods wait."""
    groups: dict[tuple[str, str, str], list[PodView]] = {}
    waiting: list[str] = []
    for pod in pods:
        if not pod.plan_id or not pod.live:
            continue
        view = records.get((pod.namespace, pod.plan_id))
        if view is None or view.record is None:
            continue
        if not belongs(pod, view):
            if pod.gated_by_us:
                waiting.append(
                    f"{pod.key}: not a pod of {view.key} (owner differs), though it carries its plan id"
                )
            continue
        record = view.record
        pod_set = pod_set_in(pod, record)
        if pod_set is None or pod_set not in record.pod_sets:
            if pod.gated_by_us:
                waiting.append(f"{pod.key}: PodSet {pod_set!r} is not in placement {pod.plan_id}")
            continue
        groups.setdefault((pod.namespace, pod.plan_id, pod_set), []).append(pod)
    return groups, waiting


Chosen = tuple[WorkloadView, str, PodView, PodPlacement]
"""A gated pod matched to a slot: its workload, PodSet, the pod and the slot."""


def pins_for(
    pods: Iterable[PodView],
    records: Records,
    *,
    hostnames: Mapping[str, str] | None = None,
    now: str = "",
    claims: bool = True,
) -> PinResult:
    """Pins for every pod gated by us that belongs to one of ``records`` (see :func:`ready_records`).

    ``pods`` must hold every live pod carrying the plan-id label (gated or
    not, bound or not), so that taken slots are seen. ``hostnames`` maps node
    names to their hostname labels; ``now`` stamps each pin; ``claims``:
    pods may be given optsched claims (False under ``--no-dra-claims``).
    """
    groups, waiting = _groups(pods, records)
    names = hostnames or {}
    chosen: list[Chosen] = []
    for (namespace, plan_id, pod_set), group in sorted(groups.items()):
        view = records[(namespace, plan_id)]
        matched, waits = _match(view, pod_set, group)
        chosen += matched
        waiting += waits
    claimless = [(v.namespace, _plan(v), ps, slot.index) for v, ps, pod, slot in chosen if not pod.claim_name]
    guard = FirstFitGuard.of(records, groups, claimless, claims=claims)
    pins: list[PodPin] = []
    for view, pod_set, pod, slot in chosen:
        if not pod.claim_name and on_dra(slot):
            hazard = guard.hazard((view.namespace, _plan(view), pod_set, slot.index), slot.node)
            if hazard is not None:
                waiting.append(f"{pod.key}: {hazard}")
                continue
        claim = _claim(view, pod_set, pod, slot) if pod.claim_name else None
        if isinstance(claim, str):
            waiting.append(f"{pod.key}: {claim}")
            continue
        pins.append(_pin(pod, _plan(view), pod_set, slot, names, pinned_at=now, claim=claim))
    return PinResult(pins=tuple(pins), waiting=tuple(waiting))


def _plan(view: WorkloadView) -> str:
    return view.record.plan_id if view.record is not None else ""


def _form(pod: PodView, plan_id: str, pod_set: str) -> ClaimForm | None:
    """What the pod's optsched claim is for its PodSet (None: it names none)."""
    if not pod.claim_name:
        return None
    index = pod.completion_index if pod.job_index is None else None
    return claim_form(pod.claim_name, pod.namespace, plan_id, pod_set, index)


def _match(view: WorkloadView, pod_set: str, group: list[PodView]) -> tuple[list[Chosen], list[str]]:
    """One PodSet's gated pods matched to slots: a pod with the claim of its completion index to that
    slot, another indexed pod to its index where free, the rest to the lowest free slots (pods with a
    claim to DRA slots, pods without one to device-plugin slots first); and why the others wait."""
    record = view.record
    if record is None:  # never: _groups keeps only workloads with a record
        return [], []
    slots = {s.index: s for s in record.slots(pod_set)}
    taken = {p.slot_index for p in group if not p.gated_by_us and p.slot_index is not None}
    gated = sorted((p for p in group if p.gated_by_us), key=lambda p: (p.created, p.name))
    chosen: list[Chosen] = []
    claimed: list[PodView] = []
    claimless: list[PodView] = []
    waiting: list[str] = []
    for pod in gated:
        index, form = pod.completion_index, _form(pod, record.plan_id, pod_set)
        if form == ClaimForm.FOREIGN:
            waiting.append(
                f"{pod.key}: its claim {pod.claim_name} is not one optsched names for PodSet {pod_set} "
                f"of plan {record.plan_id}; nothing is created for it"
            )
        elif form == ClaimForm.INDEXED and (index not in slots or index in taken):
            waiting.append(f"{pod.key}: slot {pod_set}/{index} of its claim {pod.claim_name} is taken")
        elif form in (ClaimForm.INDEXED, None) and index in slots and index not in taken:
            taken.add(index)
            chosen.append((view, pod_set, pod, slots[index]))
        else:
            (claimed if form == ClaimForm.UNINDEXED else claimless).append(pod)
    free = [slots[i] for i in sorted(slots) if i not in taken]
    dra = [s for s in free if on_dra(s)]
    for pod, slot in zip(claimed, dra, strict=False):
        chosen.append((view, pod_set, pod, slot))
    rest = [s for s in free if not on_dra(s)] + dra[len(claimed) :]
    for pod, slot in zip(claimless, rest, strict=False):
        chosen.append((view, pod_set, pod, slot))
    left = claimed[len(dra) :] + claimless[len(rest) :]
    waiting += [f"{p.key}: every planned slot of PodSet {pod_set} is taken" for p in left]
    return chosen, waiting


def _claim(view: WorkloadView, pod_set: str, pod: PodView, slot: PodPlacement) -> ClaimPlan | str:
    """The claim the pod's slot needs, or why the pod cannot be given one (it waits)."""
    if not on_dra(slot):
        return f"it names claim {pod.claim_name} but slot {pod_set}/{slot.index} is not on a DRA node"
    requests = requests_for(pod.claim_containers, pod.claim_entries, view.pod_specs.get(pod_set, {}))
    if isinstance(requests, str):
        return requests
    plan = ClaimPlan(
        name=str(pod.claim_name),
        namespace=pod.namespace,
        plan_id=view.record.plan_id if view.record else "",
        pod_set=pod_set,
        slot=slot,
        requests=requests,
        pod_name=pod.name,
        pod_uid=pod.uid,
    )
    if all(r.template is None for r in requests):
        problem = plan.problem()
        if problem is not None:
            return problem
    return plan


def _pin(
    pod: PodView,
    plan_id: str,
    pod_set: str,
    slot: PodPlacement,
    hostnames: Mapping[str, str],
    pinned_at: str = "",
    claim: ClaimPlan | None = None,
) -> PodPin:
    return PodPin(
        namespace=pod.namespace,
        name=pod.name,
        resource_version=pod.resource_version,
        plan_id=plan_id,
        pod_set=pod_set,
        slot=slot,
        remaining_gates=tuple(g for g in pod.gates if g != SCHEDULING_GATE),
        hostname=hostnames.get(slot.node, ""),
        pinned_at=pinned_at,
        claim=claim,
    )


def ungates_for(pods: Iterable[PodView], queues: ManagedQueues) -> tuple[PodPin, ...]:
    """Our gate lifted from live pods of LocalQueues known not to be ours (and carrying no plan id)."""
    out = []
    for pod in pods:
        if not pod.gated_by_us or not pod.live or pod.plan_id or pod.queue_name is None:
            continue
        if queues.verdict(pod.namespace, pod.queue_name) is False:
            out.append(
                PodPin(
                    namespace=pod.namespace,
                    name=pod.name,
                    resource_version=pod.resource_version,
                    plan_id="",
                    pod_set="",
                    slot=PodPlacement(index=0, node="-"),
                    remaining_gates=tuple(g for g in pod.gates if g != SCHEDULING_GATE),
                    ungate_only=True,
                )
            )
    return tuple(out)


def ready_records(workloads: Iterable[WorkloadView]) -> dict[tuple[str, str], WorkloadView]:
    """Unfinished workloads whose check is Ready and whose record is usable, by namespace and plan id:
    the pods that may be pinned."""
    out: dict[tuple[str, str], WorkloadView] = {}
    for view in workloads:
        ready = view.check is not None and view.check.state == CheckState.READY
        reserved = view.holds_quota or view.lifecycle == ks.Lifecycle.ADMITTED
        if ready and reserved and view.lifecycle != ks.Lifecycle.FINISHED and view.record is not None:
            out[(view.namespace, view.record.plan_id)] = view
    return out
