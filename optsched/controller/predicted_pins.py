"""On device-plugin nodes, pods get their GPUs one at a time, in the order the plan predicted them.

NVIDIA's device plugin cannot be told which GPUs a pod gets; it picks with
its best-effort policy among the node's free GPUs when kubelet admits the
pod. A plan's GPUs for such a node (enforcement ``predicted``) are that
policy's picks with the plan's pods taken in a given order, each pick
removing its GPUs before the next: pods of older records first (a later
plan counted their GPUs as taken), then ``node_order`` within a plan. The
prediction holds only if kubelet sees the pods in that order, so at most
one predicted pod per node is between its pin and its devices:

* a node is *busy* while a predicted pod pinned there has not bound yet,
  or has bound but the node's ``NodeGPUs`` (where an agent reports the
  node) does not list its devices yet and it was pinned less than
  :data:`READ_BACK_SECONDS` ago;
* on a node that is not busy, only the first gated pod in plan order is
  pinned; the others wait, with a line saying for whom;
* a slot of a Ready record with no pod yet (its workload's pods are still
  being created: the Job controller makes them one workload, even one pod,
  at a time) holds back every pod after it in the node's order, for at most
  :data:`AWAIT_SECONDS` after its plan, so a pod that appears early does not
  take GPUs the plan gave to one that comes first. Past that (a pod that
  finished, one that will never come) the order goes on without it.

Pins of other enforcement (DRA claims, GPUs left to the node) pass
unchanged: kube-scheduler's DRA allocator or the node decides those, in
any order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from optsched.capacity.prediction import predicted_pick
from optsched.controller.node_free import FreeNow
from optsched.controller.pinning import PodPin, Records, ready_records
from optsched.controller.read_back import ReadBack
from optsched.controller.views import PodView, WorkloadView, pod_set_in
from optsched.model.placement import Enforcement, PodPlacement

MISMATCH_SECONDS = 30.0
"""How long a node's pins wait when none of them is the device plugin's pick on its free GPUs now."""
READ_BACK_SECONDS = 120.0
"""How long a bound predicted pod keeps its node busy while no agent lists its devices."""
AWAIT_SECONDS = 60.0
"""How long after its plan a predicted slot that has no pod yet holds back the pods after it on its node."""

OrderKey = tuple[float, int, str, str, int]
"""Where a slot comes in its node's order: plan time, place in the plan's order, plan id, PodSet, index."""


def in_node_order(slot: PodPlacement) -> bool:
    """A slot on a device-plugin node that gets its GPUs in the plan's order (predicted ones, and the
    pods after the first one off its prediction, which must not get theirs before it)."""
    return slot.node_order is not None and slot.enforcement != Enforcement.DRA


def _slot(pod: PodView, records: Records) -> tuple[PodPlacement, float] | None:
    """The predicted slot a pinned pod took, and its record's plan time; None for any other pod."""
    if pod.plan_id is None or pod.slot_index is None:
        return None
    view = records.get((pod.namespace, pod.plan_id))
    record = view.record if view is not None else None
    if record is None:
        return None
    pod_set = pod_set_in(pod, record)
    slot = next((s for s in record.slots(pod_set or "") if s.index == pod.slot_index), None)
    if slot is None or not in_node_order(slot):
        return None
    return slot, record.planned_at


def busy_nodes(
    pods: Iterable[PodView], records: Records, read_back: ReadBack, *, now: datetime
) -> dict[str, str]:
    """Node -> the predicted pod whose devices are not handed out yet there (``namespace/name``)."""
    busy: dict[str, str] = {}
    for pod in pods:
        if not pod.live or pod.gated_by_us:
            continue
        found = _slot(pod, records)
        if found is None:
            continue
        node = found[0].node
        if pod.node is None:
            busy[node] = pod.key
        elif read_back.serves(pod.node) and not read_back.lists(pod.node, (pod.namespace, pod.name)):
            pinned = pod.pinned_at
            if pinned is None or now - pinned < timedelta(seconds=READ_BACK_SECONDS):
                busy[node] = pod.key
    return busy


def _key(planned_at: float, plan_id: str, pod_set: str, slot: PodPlacement) -> OrderKey:
    within = slot.node_order if slot.node_order is not None else slot.index
    return (planned_at, within, plan_id, pod_set, slot.index)


def _order(pin: PodPin, records: Records) -> OrderKey:
    view = records.get((pin.namespace, pin.plan_id))
    planned_at = view.record.planned_at if view is not None and view.record is not None else 0.0
    return _key(planned_at, pin.plan_id, pin.pod_set, pin.slot)


def awaited_slots(
    pods: Iterable[PodView], records: Records, pins: Sequence[PodPin], *, now: datetime
) -> dict[str, tuple[OrderKey, str]]:
    """Node -> the first slot in its order that no pod has taken or takes now, planned less than
    :data:`AWAIT_SECONDS` ago (its order key and ``namespace/workload PodSet[index]``)."""
    taken = {(p.namespace, p.plan_id, p.pod_set, p.slot.index) for p in pins}
    for pod in pods:
        view = records.get((pod.namespace, pod.plan_id or ""))
        if pod.live and pod.slot_index is not None and view is not None and view.record is not None:
            pod_set = pod_set_in(pod, view.record) or ""
            taken.add((pod.namespace, view.record.plan_id, pod_set, pod.slot_index))
    awaited: dict[str, tuple[OrderKey, str]] = {}
    for (namespace, plan_id), view in records.items():
        record = view.record
        if record is None or now.timestamp() - record.planned_at >= AWAIT_SECONDS:
            continue
        for pod_set, slots in record.pod_sets.items():
            for slot in slots:
                if not in_node_order(slot) or (namespace, plan_id, pod_set, slot.index) in taken:
                    continue
                key = _key(record.planned_at, plan_id, pod_set, slot)
                if slot.node not in awaited or key < awaited[slot.node][0]:
                    awaited[slot.node] = (key, f"{namespace}/{view.name} {pod_set}[{slot.index}]")
    return awaited


def in_plan_order(
    pins: Sequence[PodPin],
    busy: Mapping[str, str],
    records: Records,
    awaited: Mapping[str, tuple[OrderKey, str]] | None = None,
    free: Callable[[str], FreeNow | None] | None = None,
    at: datetime | None = None,
) -> tuple[tuple[PodPin, ...], tuple[str, ...]]:
    """The pins to make now (every other pin, and one predicted pin per free node), and why the rest wait.

    On a node that is not busy the pin made is the one whose planned GPUs are NVIDIA's pick on the GPUs
    ``free`` there now, whatever the order says (turns can come out of order: a record written a cycle
    late); where none is, the first in plan order, unless a slot of ``awaited`` comes before it, or its
    record is younger than :data:`MISMATCH_SECONDS` at ``at`` (the pod planned before it on the node
    may still be on its way: a record written a cycle late is not awaited yet)."""
    kept: list[PodPin] = []
    waiting: list[str] = []
    candidates: dict[str, list[PodPin]] = {}
    for pin in pins:
        if pin.ungate_only or not in_node_order(pin.slot):
            kept.append(pin)
        elif pin.slot.node in busy:
            waiting.append(
                f"{pin.key}: waits until pod {busy[pin.slot.node]} on {pin.slot.node} has its GPUs, so "
                "NVIDIA's device plugin picks from the free GPUs the plan predicted"
            )
        else:
            candidates.setdefault(pin.slot.node, []).append(pin)
    for node, here in sorted(candidates.items()):
        chosen, why = _choose(node, here, records, (awaited or {}).get(node), free, at)
        kept += [chosen] if chosen is not None else []
        waiting += [f"{p.key}: {why}" for p in here if p is not chosen]
    return tuple(kept), tuple(waiting)


def _choose(
    node: str,
    pins: list[PodPin],
    records: Records,
    ahead: tuple[OrderKey, str] | None,
    free: Callable[[str], FreeNow | None] | None,
    at: datetime | None,
) -> tuple[PodPin | None, str]:
    """The one pin to make on ``node`` now (None: wait), and what the others wait for."""
    ordered = sorted(pins, key=lambda p: _order(p, records))
    now = free(node) if free is not None else None
    first = ordered[0]
    if now is not None:
        for pin in ordered:
            gpus = tuple(sorted(pin.slot.gpus or ()))
            if gpus and len(gpus) <= len(now.free) and predicted_pick(now.board, now.free, len(gpus)) == gpus:
                return pin, f"waits for {pin.key}, whose GPUs are the device plugin's pick on {node} now"
        age = at.timestamp() - _order(first, records)[0] if at is not None else MISMATCH_SECONDS
        if age < MISMATCH_SECONDS:
            return None, (
                f"no pod's planned GPUs are the device plugin's pick on {node} now; waiting up to "
                f"{MISMATCH_SECONDS:.0f}s for the pod planned before them there"
            )
    if ahead is not None and ahead[0] < _order(first, records):
        return None, f"waits for the pod of {ahead[1]}, planned before it on {node}, to be created"
    return first, f"waits for {first.key} to get its GPUs on {node} first (plan order)"


PREDICTION_STATES = ("agreed", "drifted", "unconfirmed")
"""How a bound pod with predicted GPUs stands: its node's agent lists the planned GPUs, other GPUs, or
nothing yet (no agent on the node, or not read back yet)."""


def prediction_outcomes(
    pods: Iterable[PodView], workloads: Iterable[WorkloadView], read_back: ReadBack
) -> dict[str, int]:
    """Bound, live pods with predicted GPUs of Ready ``workloads``, counted by :data:`PREDICTION_STATES`."""
    records = ready_records(workloads)
    counts = dict.fromkeys(PREDICTION_STATES, 0)
    for pod in pods:
        found = _slot(pod, records) if pod.live and pod.node is not None else None
        if found is None or pod.node is None or found[0].enforcement != Enforcement.PREDICTED:
            continue
        held = read_back.held.get(pod.node, {}).get((pod.namespace, pod.name))
        if held is None:
            counts["unconfirmed"] += 1
        elif set(held) == set(found[0].gpus or ()):
            counts["agreed"] += 1
        else:
            counts["drifted"] += 1
    return counts
