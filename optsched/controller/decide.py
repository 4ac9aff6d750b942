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
  (default 60 s) so Kueue releases the quota and requeues the workload.
* **Stale record** (record present but our check Pending, i.e. an eviction
  reset the check or a crash happened between the two writes): the record is
  dropped and the workload planned afresh; nothing was pinned from it because
  its pods never existed without a Ready check.
* **Lost node** (check Ready, a pod not yet bound is planned on a node that
  vanished or is NotReady): set ``Retry`` with ``requeueAfterSeconds=0``;
  Kueue evicts and requeues the workload, and the next plan places it again.
* **Malformed** (our check Pending, the spec or record cannot be read): the
  check message says what is wrong; the workload is never planned.
* Workloads without our check, finished or inactive ones are never touched.

Metrics and Events name the binding reason by its code; an Event goes out
only with a change of our check that sends the workload back (quota
released, re-planned), never for a deferral that stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from optsched.controller.events import EventReason
from optsched.controller.inputs import PlanningInput, Report
from optsched.controller.options import DeferPolicy, Options
from optsched.controller.pinning import PodPin, pins_for, ready_records
from optsched.controller.records import PlacementRecord, record_from_decision
from optsched.controller.views import PodView, WorkloadView, by_plan
from optsched.kueue import workload_status as ks
from optsched.kueue.workload_status import CheckEntry
from optsched.model.events import Event, EventType
from optsched.model.names import KUEUE_API, PLAN_ID_LABEL, PODSET_LABEL, PRODUCT_LABEL
from optsched.model.plan import Decision, Plan
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import CheckState, Node, Workload

MAX_MESSAGE = 1024
NOT_PLANNED = Reason(code=ReasonCode.NOT_PLANNED, message="not in this cycle's plan")


class ActionKind(StrEnum):
    ADMIT = "admit"
    DEFER = "defer"
    RELEASE = "release"
    """Deferred past the hold time: Retry, so Kueue releases the quota and requeues."""
    DROP_RECORD = "drop-record"
    REPLAN = "replan"
    """A planned node went away before the pods bound: Retry at once, to be planned again."""


@dataclass(frozen=True)
class CheckUpdate:
    """Our entry of ``status.admissionChecks`` as it should be after this cycle."""

    check: str
    state: CheckState
    message: str
    last_transition_time: str
    pod_set_updates: tuple[dict[str, Any], ...] = ()
    requeue_after_seconds: int | None = None

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.check,
            "state": self.state.value,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.pod_set_updates:
            out["podSetUpdates"] = [dict(u) for u in self.pod_set_updates]
        if self.requeue_after_seconds is not None:
            out["requeueAfterSeconds"] = self.requeue_after_seconds
        return out


@dataclass(frozen=True)
class WorkloadAction:
    """The writes for one workload, applied in order: record first, then the check, then the Event."""

    namespace: str
    name: str
    uid: str
    kind: ActionKind
    record: PlacementRecord | None = None
    """Write this record (before the check)."""
    drop_record: bool = False
    check: CheckUpdate | None = None
    reason: ReasonCode | None = None
    """The binding reason of a deferral or release: what metrics count it under."""
    event: Event | None = None
    """Sent once the check is written."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def writes(self) -> bool:
        return self.record is not None or self.drop_record or self.check is not None


@dataclass(frozen=True)
class Decisions:
    """Everything one cycle writes, in the order its last phase sends it."""

    actions: tuple[WorkloadAction, ...] = ()
    pins: tuple[PodPin, ...] = ()
    waiting: tuple[str, ...] = ()
    """Gated pods that wait for a slot (``namespace/name: why``)."""
    events: tuple[Event, ...] = ()
    """Events on objects that could not be used."""

    def of_kind(self, kind: ActionKind | str) -> list[WorkloadAction]:
        return [a for a in self.actions if a.kind == kind]


@dataclass(frozen=True)
class _Facts:
    """What every rule reads besides the workload itself."""

    now: datetime
    policy: DeferPolicy
    nodes: Mapping[str, Node]
    flavor_labels: Mapping[str, Mapping[str, str]]
    pods: Mapping[str, Sequence[PodView]]
    """Pods by plan id."""

    @property
    def stamp(self) -> str:
        return ks.format_time(self.now)


def decide(
    inp: PlanningInput,
    plan: Plan | None,
    *,
    now: datetime,
    policy: DeferPolicy = Options.policy,
    reports: Iterable[Report] = (),
    planned: bool = True,
) -> Decisions:
    """Everything this cycle writes: check updates and records, pod pins, and Events for ``reports``.

    ``plan`` is None when nothing needed planning. ``planned`` is False when
    planning failed: then no workload's check is touched, while pods of
    admitted workloads are still pinned.
    """
    facts = _Facts(
        now=now,
        policy=policy,
        nodes={n.name: n for n in inp.snapshot.nodes},
        flavor_labels={f.name: f.node_labels for f in inp.snapshot.flavors},
        pods=by_plan(inp.pods),
    )
    actions: list[WorkloadAction] = []
    if planned:
        for _key, view in sorted(inp.workloads.items()):
            action = _decide_workload(view, plan, facts)
            if action is not None:
                actions.append(action)
    pins = pins_for(inp.pods, ready_records(inp.workloads.values()))
    return Decisions(
        actions=tuple(actions),
        pins=pins.pins,
        waiting=pins.waiting,
        events=tuple(r.event() for r in reports),
    )


def _decide_workload(view: WorkloadView, plan: Plan | None, facts: _Facts) -> WorkloadAction | None:
    """The action for one workload, by the rules above (None: nothing to do)."""
    check = view.check
    if check is None or not view.live:
        return None
    if check.state == CheckState.READY:
        return _ready(view, check, facts)
    if check.state != CheckState.PENDING:
        return None
    if not view.holds_quota:
        if view.record is not None:
            return _action(view, ActionKind.DROP_RECORD, drop_record=True)
        return None
    if view.problem is not None:
        return _malformed(view, check, facts)
    decision = plan.decision(view.key) if plan is not None else None
    if decision is not None and decision.decision == Decision.ADMIT and view.workload is not None:
        return _admit(view, view.workload, check, record_from_decision(view.uid, decision), facts)
    return _defer(view, check, list(decision.reasons) if decision is not None else [NOT_PLANNED], facts)


def _action(view: WorkloadView, kind: ActionKind, **fields: Any) -> WorkloadAction:
    return WorkloadAction(namespace=view.namespace, name=view.name, uid=view.uid, kind=kind, **fields)


def _event(view: WorkloadView, reason: str, message: str, type: EventType = EventType.NORMAL) -> Event:
    return Event(
        kind="Workload",
        api_version=view.api_version or KUEUE_API,
        namespace=view.namespace,
        name=view.name,
        uid=view.uid,
        reason=reason,
        message=message,
        type=type,
    )


def _message(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _update(check: CheckEntry, state: CheckState, message: str, facts: _Facts, **extra: Any) -> CheckUpdate:
    """Our entry in ``state``; its transition time moves only when the state does."""
    same = check.state == state and check.last_transition_time
    return CheckUpdate(
        check=check.name,
        state=state,
        message=_message(message),
        last_transition_time=check.last_transition_time if same else facts.stamp,
        **extra,
    )


def _ready(view: WorkloadView, check: CheckEntry, facts: _Facts) -> WorkloadAction | None:
    """An admitted workload is sent back only when a node planned for a pod not bound yet is gone."""
    if view.record is None:
        return None
    lost = _lost_nodes(view.record, facts.pods.get(view.record.plan_id, ()), facts.nodes)
    if not lost:
        return None
    message = (
        f"optsched: planned node(s) {', '.join(lost)} gone or NotReady before the pods bound; re-planning"
    )
    return _action(
        view,
        ActionKind.REPLAN,
        check=_update(check, CheckState.RETRY, message, facts, requeue_after_seconds=0),
        event=_event(view, EventReason.PLANNED_NODE_LOST, message, EventType.WARNING),
    )


def _lost_nodes(record: PlacementRecord, pods: Iterable[PodView], nodes: Mapping[str, Node]) -> list[str]:
    """Nodes of not-yet-bound slots that no longer exist or are NotReady."""
    bound = {(p.pod_set, p.slot_index) for p in pods if p.node is not None and p.slot_index is not None}
    lost = set()
    for pod_set, slots in record.pod_sets.items():
        for slot in slots:
            node = nodes.get(slot.node)
            if (pod_set, slot.index) not in bound and (node is None or not node.ready):
                lost.add(slot.node)
    return sorted(lost)


def _malformed(view: WorkloadView, check: CheckEntry, facts: _Facts) -> WorkloadAction | None:
    message = f"optsched cannot plan this workload: {view.problem}"
    if check.message == _message(message):
        return None
    return _action(
        view,
        ActionKind.DEFER,
        reason=ReasonCode.INVALID_WORKLOAD,
        check=_update(check, CheckState.PENDING, message, facts),
    )


def _admit(
    view: WorkloadView, workload: Workload, check: CheckEntry, record: PlacementRecord, facts: _Facts
) -> WorkloadAction:
    nodes = sorted({s.node for slots in record.pod_sets.values() for s in slots})
    shown = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    message = _message(f"optsched plan {record.plan_id}: {record.pod_count} pod(s) on {shown}")
    updates = pod_set_updates(record, workload, facts.nodes, facts.flavor_labels)
    return _action(
        view,
        ActionKind.ADMIT,
        record=None if view.record == record else record,
        check=_update(check, CheckState.READY, message, facts, pod_set_updates=updates),
    )


def _defer(view: WorkloadView, check: CheckEntry, reasons: list[Reason], facts: _Facts) -> WorkloadAction:
    """Keep waiting with the plan's reasons, or send the quota back once the hold time is over."""
    since = view.quota_reserved_since
    waited = (facts.now - since).total_seconds() if since is not None else 0.0
    code = reasons[0].code if reasons else ReasonCode.NOT_PLANNED
    said = "; ".join(r.message for r in reasons)
    has_record = view.record is not None
    policy = facts.policy
    if waited >= policy.hold_seconds:
        message = (
            f"optsched: deferred for {int(waited)}s, releasing quota and requeueing after "
            f"{policy.retry_after_seconds}s: " + said
        )
        update = _update(
            check, CheckState.RETRY, message, facts, requeue_after_seconds=policy.retry_after_seconds
        )
        return _action(
            view,
            ActionKind.RELEASE,
            reason=code,
            drop_record=has_record,
            check=update,
            event=_event(view, code, update.message),
        )
    message = "optsched: waiting: " + said
    if not has_record and check.message == _message(message):
        return _action(view, ActionKind.DEFER, reason=code)
    return _action(
        view,
        ActionKind.DEFER,
        reason=code,
        drop_record=has_record,
        check=_update(check, CheckState.PENDING, message, facts),
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
