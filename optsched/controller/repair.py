"""Rules for workloads whose check is already Ready: every inconsistent state is repaired.

A Ready check promises that the pods will be pinned to the placement in
the record. When that promise cannot be kept, the workload is sent back
rather than left with gated or Pending pods forever:

* **Quota gone** (``QuotaReserved`` false and not Admitted: the Ready write
  landed after Kueue evicted the workload): the check goes back to
  ``Pending`` and the record is dropped, so the next reservation is planned
  afresh instead of admitted at once with a stale placement.
* **Record lost** (missing, unreadable, or not matching its plan id):
  ``Retry``, so Kueue requeues it and it is planned again.
* **Planned node lost** (a slot not bound yet is on a node that is gone,
  NotReady or cordoned): ``Retry`` at once.
* **Claim cannot be the slot's** (DRA mode: the pod's claim name is held by
  a claim allocated to other devices for a live owner, found when the pin
  went to create it): ``Retry`` at once, a new plan names new claims.
* **Planned GPU unavailable** (DRA mode: a slot not bound yet whose pod's
  claim selects a GPU the node's ResourceSlice no longer publishes, or that
  another claim holds; :mod:`optsched.controller.dra_repair`): ``Retry`` at
  once, the Event names the GPU and why.
* **Pin cannot bind** (a pinned pod kube-scheduler has found unschedulable
  for ``unschedulable_seconds``: a taint, capacity taken by a pod placed
  around optsched, a label change): ``Retry``.

The first Retry carries ``requeueAfterSeconds: 0`` (the workload did
nothing wrong); later ones back off on Kueue's retry count, so a pin that
fails for a reason the planner cannot see does not loop at full speed.

A workload whose record is lost while its pods already run is not sent back
(that would kill a running job for a bookkeeping problem): its pods keep
running, and the problem is reported on it as an Event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from optsched.controller.actions import ActionKind, Facts, WorkloadAction, action, event, update
from optsched.controller.dra_repair import unavailable_slot
from optsched.controller.drift_repair import taken_island_promise
from optsched.controller.events import EventReason
from optsched.controller.inputs import NodePresence
from optsched.controller.records import PlacementRecord
from optsched.controller.views import PodView, WorkloadView, pod_set_in, pods_of
from optsched.kueue import workload_status as ks
from optsched.kueue.workload_status import CheckEntry
from optsched.model.events import EventType
from optsched.model.snapshot import CheckState


def repair_ready(view: WorkloadView, check: CheckEntry, facts: Facts) -> WorkloadAction | None:
    """The repair a Ready workload needs, or None when its promise still holds."""
    if not view.holds_quota and view.lifecycle != ks.Lifecycle.ADMITTED:
        message = "optsched: Ready without a quota reservation (evicted while being admitted); planned again"
        return action(
            view,
            ActionKind.RESET,
            drop_record=view.record is not None or view.record_problem is not None,
            check=update(view, check, CheckState.PENDING, message, facts),
        )
    if view.record is None:
        if _running(view, facts):
            return None
        why = view.record_problem or "the placement record is missing"
        return _retry(view, check, facts, EventReason.PLACEMENT_LOST, f"optsched: {why}; re-planning")
    pods = pods_of(view, facts.pods)
    lost = lost_nodes(view.record, pods, facts.present)
    if lost:
        message = (
            f"optsched: planned node(s) {', '.join(lost)} gone, NotReady or cordoned before the pods bound; "
            "re-planning"
        )
        return _retry(view, check, facts, EventReason.PLANNED_NODE_LOST, message)
    conflict = facts.claim_conflicts.get((view.namespace, view.record.plan_id))
    if conflict is not None:
        message = f"optsched: {conflict}; re-planning"
        sent = _retry(view, check, facts, EventReason.CLAIM_UNENFORCEABLE, message)
        return replace(sent, settles=(view.namespace, view.record.plan_id))
    gone = unavailable_slot(view, pods, facts.dra)
    if gone is not None:
        return _retry(view, check, facts, EventReason.PLANNED_GPU_UNAVAILABLE, gone)
    broken = taken_island_promise(view, facts)
    if broken is not None:
        return _retry(view, check, facts, EventReason.PREDICTION_BROKEN, broken)
    stuck = _unschedulable(pods, facts)
    if stuck:
        message = (
            f"optsched: pinned pod(s) {', '.join(stuck)} could not bind for "
            f"{facts.policy.unschedulable_seconds}s or more; re-planning"
        )
        return _retry(view, check, facts, EventReason.PIN_UNSCHEDULABLE, message)
    return None


def _running(view: WorkloadView, facts: Facts) -> bool:
    """Some pod the workload's owner owns is bound (found without the record's plan id)."""
    if not view.owners:
        return False
    return any(
        p.bound and p.namespace == view.namespace and (p.uid in view.owners or p.owners & view.owners)
        for pods in facts.pods.values()
        for p in pods
    )


def _retry(
    view: WorkloadView, check: CheckEntry, facts: Facts, reason: EventReason, message: str
) -> WorkloadAction:
    count = view.requeue_count
    after = 0 if count == 0 else facts.policy.retry_after(count - 1)
    return action(
        view,
        ActionKind.REPLAN,
        check=update(view, check, CheckState.RETRY, message, facts, requeue_after_seconds=after),
        event=event(view, reason, message, EventType.WARNING),
    )


def lost_nodes(
    record: PlacementRecord, pods: Iterable[PodView], present: Mapping[str, NodePresence]
) -> list[str]:
    """Nodes of not-yet-bound slots that are gone, NotReady or cordoned."""
    bound = {
        (pod_set_in(p, record), p.slot_index) for p in pods if p.node is not None and p.slot_index is not None
    }
    lost = set()
    for pod_set, slots in record.pod_sets.items():
        for slot in slots:
            node = present.get(slot.node)
            usable = node is not None and node.ready and not node.cordoned
            if (pod_set, slot.index) not in bound and not usable:
                lost.add(slot.node)
    return sorted(lost)


def _unschedulable(pods: Iterable[PodView], facts: Facts) -> list[str]:
    """Pinned, unbound, live pods kube-scheduler has found unschedulable for too long."""
    limit = facts.policy.unschedulable_seconds
    out = []
    for pod in pods:
        since = pod.unschedulable_since
        if since is not None and pod.pinned_at is not None:
            since = max(since, pod.pinned_at)  # gated pods are "unschedulable" from creation on
        pinned = pod.live and pod.node is None and not pod.gated_by_us and pod.slot_index is not None
        if pinned and since is not None and (facts.now - since).total_seconds() >= limit:
            out.append(pod.key)
    return sorted(out)
