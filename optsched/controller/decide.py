"""The decision core: from a plan and the workload views to everything one cycle writes.

Pure: no clock, no client. Every input is a value, every output is a value
(:class:`Decisions`: check updates, records, pod pins, Events), so each rule
below is unit-tested without a cluster and only the cycle's last phase writes.

Rules, for each live Workload that carries one of our admission checks:

* **Admit** (quota reserved, our check Pending, the plan admits it): first
  write the placement record annotation, then set our check ``Ready`` with
  podSetUpdates that label every pod with the plan id and its PodSet. The
  order matters: pods exist only after Ready, and the ungater needs the record.
* **Defer** (the plan defers it): keep the check ``Pending`` with the plan's
  reasons as message (what ``kubectl describe workload`` shows). Holding the
  quota reservation keeps the workload at the head of its queue, which is what
  a large gang needs to avoid starving, but it also blocks smaller work that
  could run now. The policy: hold for ``hold_seconds`` after quota was
  reserved (default 300 s), then set ``Retry`` with ``requeueAfterSeconds``
  (60 s, doubled per requeue) so Kueue releases the quota and requeues the workload.
* **Stale record** (record present but our check Pending, i.e. an eviction
  reset the check or a crash happened between the two writes): the record is
  dropped and the workload planned afresh; nothing was pinned from it because
  its pods never existed without a Ready check.
* **Ready** workloads whose promise cannot be kept (quota gone, record
  lost, planned node gone, pin unschedulable) are repaired (``repair``).
* **Rejected** (our check Pending, and the spec cannot be read, the workload
  is placed by Kueue TAS, or a deferral's binding reason says it can never
  fit once the hold time is over): ``Rejected`` with the reason; Kueue
  deactivates it and releases its quota instead of holding it forever.
* **Backoff**: each Retry of a deferral doubles ``requeueAfterSeconds`` with
  Kueue's requeue count, up to a ceiling.
* **MIG layouts** (``mig_decide``): the plan's layout changes are written
  to the nodes' ``NodeGPUs``; a workload planned onto slices that do not
  exist yet stays Pending, saying which change it waits for, until the plan
  places it on instances that exist.
* **Orphaned claims**: optsched's ResourceClaims whose pod is gone are
  deleted after ``orphan_claim_seconds`` (``claim_sweep``).
* Workloads without our check, finished or inactive ones are never touched.

Metrics and Events name the binding reason by its code; an Event goes out
only with a change of our check that sends the workload back (quota
released, re-planned), never for a deferral that stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from optsched.controller.actions import (
    MAX_MESSAGE,
    ActionKind,
    CheckUpdate,
    Decisions,
    Facts,
    WorkloadAction,
    action,
    event,
    one_line,
    update,
)
from optsched.controller.claim_sweep import orphans
from optsched.controller.events import EventReason
from optsched.controller.inputs import PlanningInput, Report
from optsched.controller.mig_decide import mig_decisions
from optsched.controller.options import DeferPolicy, Options
from optsched.controller.pinning import pins_for, ready_records, ungates_for
from optsched.controller.predicted_pins import awaited_slots, busy_nodes, in_plan_order
from optsched.controller.records import PlacementRecord, record_from_decision
from optsched.controller.repair import repair_ready
from optsched.controller.views import WorkloadView, by_plan
from optsched.kueue.placement_record import MAX_ANNOTATION_BYTES
from optsched.kueue.workload_status import CheckEntry
from optsched.model.events import EventType
from optsched.model.names import PLAN_ID_LABEL, PODSET_LABEL, PRODUCT_LABEL
from optsched.model.plan import Decision, Plan
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import CheckState, Node, Workload

__all__ = [
    "MAX_MESSAGE",
    "ActionKind",
    "CheckUpdate",
    "Decisions",
    "WorkloadAction",
    "decide",
    "pod_set_updates",
]

NOT_PLANNED = Reason(code=ReasonCode.NOT_PLANNED, message="not in this cycle's plan")
NEVER_FITS = "optsched: waiting (cannot fit this cluster as it stands): "
"""How a deferral whose binding reason is permanent begins; a later cycle rejects only after it."""


def decide(
    inp: PlanningInput,
    plan: Plan | None,
    *,
    now: datetime,
    policy: DeferPolicy = Options.policy,
    reports: Iterable[Report] = (),
    planned: bool = True,
    claim_conflicts: Mapping[tuple[str, str], str] | None = None,
    dra_claims: bool = True,
) -> Decisions:
    """Everything this cycle writes: check updates and records, pod pins, and Events for ``reports``.

    ``plan`` is None when nothing needed planning. ``planned`` is False when
    planning failed: then no workload's check is touched, while pods of
    admitted workloads are still pinned. ``dra_claims``: pods may be given
    optsched claims (False under ``--no-dra-claims``).
    """
    timeout = policy.mig_start_seconds
    mig = mig_decisions(
        inp.mig, plan if planned else None, inp.workloads, now=now.timestamp(), timeout=timeout
    )
    facts = Facts(
        now=now,
        policy=policy,
        nodes={n.name: n for n in inp.snapshot.nodes},
        present=inp.nodes,
        flavor_labels={f.name: f.node_labels for f in inp.snapshot.flavors},
        pods=by_plan(inp.pods),
        whole=_whole(inp),
        claim_conflicts=claim_conflicts or {},
        read_back=inp.read_back,
        dra=inp.dra,
        mig_holds=mig.holds,
    )
    actions: list[WorkloadAction] = []
    if planned:
        for _key, view in sorted(inp.workloads.items()):
            action = _decide_workload(view, plan, facts)
            if action is not None:
                actions.append(action)
    # A workload sent back in this cycle gets no more pods started on its old placement.
    sent_back = {a.key for a in actions if a.kind in (ActionKind.REPLAN, ActionKind.RESET, ActionKind.REJECT)}
    records = {k: v for k, v in ready_records(inp.workloads.values()).items() if v.key not in sent_back}
    pins = pins_for(inp.pods, records, hostnames=inp.hostnames, now=facts.stamp, claims=dra_claims)
    busy = busy_nodes(inp.pods, records, inp.read_back, now=now)
    awaited = awaited_slots(inp.pods, records, pins.pins, now=now)
    ordered, waits = in_plan_order(pins.pins, busy, records, awaited, inp.free, now)
    return Decisions(
        actions=tuple(actions),
        pins=ordered,
        waiting=pins.waiting + waits,
        events=tuple(r.event() for r in reports),
        ungates=ungates_for(inp.pods, inp.queues),
        sweeps=orphans(
            inp.claims, (p.uid for p in inp.pods), now=now, grace_seconds=policy.orphan_claim_seconds
        ),
        mig=mig,
    )


def _whole(inp: PlanningInput) -> bool:
    planned = {n.name for n in inp.snapshot.nodes}
    return all(p.ready and not p.cordoned and name in planned for name, p in inp.nodes.items())


def _decide_workload(view: WorkloadView, plan: Plan | None, facts: Facts) -> WorkloadAction | None:
    """The action for one workload, by the rules above (None: nothing to do)."""
    check = view.check
    if check is None or not view.live:
        return None
    synced = _sync(view, facts)
    if synced is not None:
        return synced
    if check.state == CheckState.READY:
        return repair_ready(view, check, facts)
    if check.state != CheckState.PENDING:
        return None
    if not view.holds_quota:
        if view.record is not None or view.record_problem is not None:
            return action(view, ActionKind.DROP_RECORD, drop_record=True)
        return None
    if view.spec_problem is not None:
        return _reject(view, check, f"optsched cannot plan this workload: {view.spec_problem}", facts)
    if view.topology_assigned:
        message = (
            "optsched cannot place a workload Kueue's Topology Aware Scheduling assigned; "
            "use a flavor without a topology"
        )
        return _reject(view, check, message, facts)
    if view.record_problem is not None:
        return action(view, ActionKind.DROP_RECORD, drop_record=True)
    decision = plan.decision(view.key) if plan is not None else None
    admits = decision is not None and decision.decision == Decision.ADMIT
    held = facts.mig_holds.get(view.key)
    if held is not None and not (admits and decision is not None and not decision.waits_for_layout):
        return _wait_layout(view, check, held, facts)
    if decision is not None and admits and view.workload is not None:
        record = record_from_decision(view.uid, decision, planned_at=facts.now.timestamp())
        size = len(record.to_annotation())
        if size > MAX_ANNOTATION_BYTES:
            message = (
                f"optsched: the placement of {record.pod_count} pods takes {size // 1024} KiB, more than the "
                f"{MAX_ANNOTATION_BYTES // 1024} KiB a Workload annotation may hold; split the workload"
            )
            return _reject(view, check, message, facts)
        return _admit(view, view.workload, check, record, facts)
    return _defer(view, check, list(decision.reasons) if decision is not None else [NOT_PLANNED], facts)


def _same_placement(written: PlacementRecord | None, new: PlacementRecord) -> bool:
    """The record on the workload already says this (when it was planned aside: the first plan stands)."""
    return written is not None and written.model_copy(update={"planned_at": new.planned_at}) == new


def _sync(view: WorkloadView, facts: Facts) -> WorkloadAction | None:
    """With several checks of ours where one is Ready and the rest Pending: Ready for all of them.

    Kueue admits only once every check is Ready; an earlier version, or a
    write that failed half way, may leave them apart.
    """
    ready = [e for e in view.entries if e.state == CheckState.READY]
    pending = [e for e in view.entries if e.state == CheckState.PENDING]
    if not ready or not pending or len(ready) + len(pending) != len(view.entries):
        return None
    first = pending[0]
    check = CheckUpdate(
        check=first.name,
        state=CheckState.READY,
        message=ready[0].message,
        last_transition_time=facts.stamp,
        pod_set_updates=ready[0].pod_set_updates,
        also=tuple(e.name for e in pending[1:]),
        resource_version=view.resource_version,
    )
    return action(view, ActionKind.SYNC, check=check)


def _reject(
    view: WorkloadView, check: CheckEntry, message: str, facts: Facts, code: ReasonCode | None = None
) -> WorkloadAction:
    """Rejected: Kueue deactivates the workload and releases its quota; the message says why."""
    said = update(view, check, CheckState.REJECTED, message, facts)
    return action(
        view,
        ActionKind.REJECT,
        reason=code or ReasonCode.INVALID_WORKLOAD,
        drop_record=view.record is not None,
        check=said,
        event=event(view, EventReason.REJECTED, said.message, EventType.WARNING),
    )


def _admit(
    view: WorkloadView, workload: Workload, check: CheckEntry, record: PlacementRecord, facts: Facts
) -> WorkloadAction:
    nodes = sorted({s.node for slots in record.pod_sets.values() for s in slots})
    shown = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    message = one_line(f"optsched plan {record.plan_id}: {record.pod_count} pod(s) on {shown}")
    updates = pod_set_updates(record, workload, facts.nodes, facts.flavor_labels)
    return action(
        view,
        ActionKind.ADMIT,
        record=None if _same_placement(view.record, record) else record,
        check=update(
            view,
            check,
            CheckState.READY,
            message,
            facts,
            pod_set_updates=updates,
            resource_version=view.resource_version,
        ),
    )


def _defer(view: WorkloadView, check: CheckEntry, reasons: list[Reason], facts: Facts) -> WorkloadAction:
    """Keep waiting with the plan's reasons; once the hold time is over, reject what can never fit and
    send the rest back to the queue with backoff."""
    since = view.quota_reserved_since
    waited = (facts.now - since).total_seconds() if since is not None else 0.0
    code = reasons[0].code if reasons else ReasonCode.NOT_PLANNED
    said = "; ".join(r.message for r in reasons)
    has_record = view.record is not None
    policy = facts.policy
    never = bool(reasons) and reasons[0].permanent and facts.whole
    if waited >= policy.hold_seconds:
        # Rejected only when it could not fit in an earlier cycle too, with every node usable.
        if policy.reject_impossible and never and check.message.startswith(NEVER_FITS):
            message = "optsched: this workload can never fit this cluster: " + said
            return _reject(view, check, message, facts, code)
        return _release(view, check, code, said, int(waited), facts)
    message = (NEVER_FITS if never else "optsched: waiting: ") + said
    if not has_record and check.message == one_line(message):
        return action(view, ActionKind.DEFER, reason=code)
    return action(
        view,
        ActionKind.DEFER,
        reason=code,
        drop_record=has_record,
        check=update(view, check, CheckState.PENDING, message, facts),
    )


def _wait_layout(view: WorkloadView, check: CheckEntry, message: str, facts: Facts) -> WorkloadAction:
    """Pending, saying which MIG layout change it waits for (no Retry: the change is on its way)."""
    if view.record is None and check.message == one_line(message):
        return action(view, ActionKind.WAIT_LAYOUT)
    said = update(view, check, CheckState.PENDING, message, facts)
    return action(view, ActionKind.WAIT_LAYOUT, drop_record=view.record is not None, check=said)


def _release(
    view: WorkloadView, check: CheckEntry, code: ReasonCode, said: str, waited: int, facts: Facts
) -> WorkloadAction:
    """Retry: Kueue releases the quota and requeues after a delay that doubles with each requeue."""
    after = facts.policy.retry_after(view.requeue_count)
    message = f"optsched: deferred for {waited}s, releasing quota and requeueing after {after}s: " + said
    said_update = update(view, check, CheckState.RETRY, message, facts, requeue_after_seconds=after)
    return action(
        view,
        ActionKind.RELEASE,
        reason=code,
        drop_record=view.record is not None,
        check=said_update,
        event=event(view, code, said_update.message),
    )


def pod_set_updates(
    record: PlacementRecord,
    workload: Workload,
    nodes: Mapping[str, Node],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> tuple[dict[str, Any], ...]:
    """Per PodSet: the plan-id and PodSet labels, and a product nodeSelector where it cannot conflict.

    Kueue fails a Workload permanently when an update conflicts with the
    template, so the product selector is added only when every pod of the
    PodSet sits on one product and neither the template's nodeSelector nor
    the flavor's nodeLabels hold the key with another value.
    """
    selectors = {ps.name: ps.node_selector for ps in workload.pod_sets}
    updates = []
    for name in sorted(record.pod_sets):
        update: dict[str, Any] = {"name": name, "labels": {PLAN_ID_LABEL: record.plan_id, PODSET_LABEL: name}}
        products = {nodes[s.node].gpu_product for s in record.pod_sets[name] if s.node in nodes}
        flavor = flavor_labels.get(record.flavors.get(name, ""), {})
        if len(products) == 1:
            product = next(iter(products))
            existing = {selectors.get(name, {}).get(PRODUCT_LABEL), flavor.get(PRODUCT_LABEL)} - {None}
            if product and existing <= {product}:
                update["nodeSelector"] = {PRODUCT_LABEL: product}
        updates.append(update)
    return tuple(updates)
