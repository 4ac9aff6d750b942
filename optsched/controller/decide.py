"""The decision core: from a plan and the raw Workloads to the writes one cycle sends.

Pure: no clock, no client. Every input is a value, every output is a value,
so each rule below is unit-tested on dictionaries.

Rules, for each Workload that carries one of our admission checks:

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
* Workloads without our check, finished or inactive ones are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from optsched.controller.inputs import pod_set_of, pods_by_plan
from optsched.controller.records import PlacementRecord, RecordError, record_from_decision, record_of
from optsched.kueue import workload_status as ks
from optsched.model.names import PLAN_ID_LABEL, POD_INDEX_ANNOTATION, PODSET_LABEL, PRODUCT_LABEL
from optsched.model.plan import Plan, WorkloadDecision
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Node, Snapshot

MAX_MESSAGE = 1024
NOT_PLANNED = Reason(code=ReasonCode.NOT_PLANNED, message="not in this cycle's plan")


@dataclass(frozen=True)
class DeferPolicy:
    """How long a deferred workload keeps its quota before it is sent back to the queue."""

    hold_seconds: int = 300
    retry_after_seconds: int = 60


@dataclass(frozen=True)
class CheckUpdate:
    """Our entry of ``status.admissionChecks`` as it should be after this cycle."""

    check: str
    state: str
    message: str
    last_transition_time: str
    pod_set_updates: tuple[dict[str, Any], ...] = ()
    requeue_after_seconds: int | None = None

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.check,
            "state": self.state,
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
    """The writes for one workload, applied in order: record first, then the check."""

    namespace: str
    name: str
    uid: str
    kind: str
    """``admit``, ``defer``, ``release``, ``drop-record``, ``replan``."""
    record: PlacementRecord | None = None
    """Write this record (before the check)."""
    drop_record: bool = False
    check: CheckUpdate | None = None
    reason: str = ""
    """Metrics label: the binding reason's code for a deferral or release, else what happened."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class _Ident:
    namespace: str
    name: str
    uid: str

    def action(self, kind: str, **fields: Any) -> WorkloadAction:
        return WorkloadAction(namespace=self.namespace, name=self.name, uid=self.uid, kind=kind, **fields)


@dataclass
class Decisions:
    actions: list[WorkloadAction] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[WorkloadAction]:
        return [a for a in self.actions if a.kind == kind]


def _message(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def pod_set_updates(
    record: PlacementRecord,
    workload: Mapping[str, Any],
    nodes: Mapping[str, Node],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> tuple[dict[str, Any], ...]:
    """Per PodSet: the plan-id and PodSet labels, and a product nodeSelector where it cannot conflict.

    Kueue fails a Workload permanently when an update conflicts with the
    template, so the product selector is added only when every pod of the
    PodSet sits on one product and neither the template's nodeSelector nor
    the flavor's nodeLabels hold the key with another value.
    """
    templates = ks.pod_set_templates(workload)
    updates = []
    for name in sorted(record.pod_sets):
        update: dict[str, Any] = {"name": name, "labels": {PLAN_ID_LABEL: record.plan_id, PODSET_LABEL: name}}
        products = {nodes[s.node].gpu_product for s in record.pod_sets[name] if s.node in nodes}
        spec = (templates.get(name) or {}).get("spec") or {}
        raw_selector = spec.get("nodeSelector")
        selector: dict[str, Any] = raw_selector if isinstance(raw_selector, dict) else {}
        flavor = flavor_labels.get(record.flavors.get(name, ""), {})
        if len(products) == 1:
            product = next(iter(products))
            existing = {selector.get(PRODUCT_LABEL), flavor.get(PRODUCT_LABEL)} - {None}
            if product and existing <= {product}:
                update["nodeSelector"] = {PRODUCT_LABEL: product}
        updates.append(update)
    return tuple(updates)


def _admit_message(record: PlacementRecord) -> str:
    nodes = sorted({s.node for slots in record.pod_sets.values() for s in slots})
    shown = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    return _message(f"optsched plan {record.plan_id}: {record.pod_count} pod(s) on {shown}")


def _node_gone(node: Node | None) -> bool:
    return node is None or not node.ready


def _lost_nodes(
    record: PlacementRecord, pods: list[Mapping[str, Any]], nodes: Mapping[str, Node]
) -> list[str]:
    """Nodes of not-yet-bound slots that no longer exist or are NotReady."""
    bound_slots: set[tuple[str, int]] = set()
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName"):
            idx = (ks.meta(pod).get("annotations") or {}).get(POD_INDEX_ANNOTATION)
            ps = pod_set_of(pod)
            if isinstance(idx, str) and idx.isdigit() and ps:
                bound_slots.add((ps, int(idx)))
    lost = set()
    for pod_set, slots in record.pod_sets.items():
        for slot in slots:
            if (pod_set, slot.index) not in bound_slots and _node_gone(nodes.get(slot.node)):
                lost.add(slot.node)
    return sorted(lost)


def decide(
    workloads: Mapping[str, Mapping[str, Any]],
    plan: Plan | None,
    snapshot: Snapshot,
    check_names: Iterable[str],
    *,
    now: datetime,
    pods: Iterable[Mapping[str, Any]] = (),
    all_nodes: Mapping[str, Node] | None = None,
    policy: DeferPolicy = DeferPolicy(),
    planning_errors: Mapping[str, str] | None = None,
) -> Decisions:
    """The writes for every workload with one of our checks.

    ``all_nodes`` are the nodes as read (including unusable ones, which the
    snapshot leaves out): a slot on a node missing from it is lost.
    ``planning_errors`` holds workloads the cycle could not plan (key -> why).
    """
    names = frozenset(check_names)
    nodes = dict(all_nodes) if all_nodes is not None else {n.name: n for n in snapshot.nodes}
    flavor_labels = {f.name: f.node_labels for f in snapshot.flavors}
    by_plan = pods_by_plan(pods)
    errors = planning_errors or {}
    stamp = ks.format_time(now)
    out = Decisions()
    for key, obj in sorted(workloads.items()):
        entry = ks.check_entry(obj, names)
        if entry is None or ks.is_finished(obj) or not ks.is_active(obj):
            continue
        m = ks.meta(obj)
        ident = _Ident(str(m.get("namespace", "default")), str(m.get("name", "")), str(m.get("uid", "")))
        try:
            record = record_of(obj)
        except RecordError:
            record = None

        def update(state: str, message: str, *, entry: ks.CheckEntry = entry, **extra: Any) -> CheckUpdate:
            same = entry.state == state
            return CheckUpdate(
                check=entry.name,
                state=state,
                message=_message(message),
                last_transition_time=entry.last_transition_time
                if same and entry.last_transition_time
                else stamp,
                **extra,
            )

        if entry.state == "Ready":
            if record is None:
                continue
            lost = _lost_nodes(record, by_plan.get(record.plan_id, []), nodes)
            if lost and not ks.is_finished(obj):
                out.actions.append(
                    ident.action(
                        kind="replan",
                        reason="node-lost",
                        check=update(
                            "Retry",
                            f"optsched: planned node(s) {', '.join(lost)} gone or NotReady "
                            "before the pods bound; re-planning",
                            requeue_after_seconds=0,
                        ),
                    )
                )
            continue
        if entry.state != "Pending":
            continue
        if not ks.holds_quota(obj):
            if record is not None:
                out.actions.append(ident.action(kind="drop-record", drop_record=True, reason="evicted"))
            continue
        if key in errors:
            message = f"optsched cannot plan this workload: {errors[key]}"
            if entry.message != _message(message):
                out.actions.append(
                    ident.action(
                        kind="defer",
                        reason=ReasonCode.INVALID_WORKLOAD.value,
                        check=update("Pending", message),
                    )
                )
            continue
        decision: WorkloadDecision | None = plan.decision(key) if plan is not None else None
        if decision is not None and decision.decision == "admit":
            new = record_from_decision(ident.uid, decision)
            updates = pod_set_updates(new, obj, nodes, flavor_labels)
            out.actions.append(
                ident.action(
                    kind="admit",
                    reason="admitted",
                    record=None if record == new else new,
                    check=update("Ready", _admit_message(new), pod_set_updates=updates),
                )
            )
            continue
        reasons = list(decision.reasons) if decision is not None else [NOT_PLANNED]
        since = ks.quota_reserved_since(obj)
        waited = (now - since).total_seconds() if since is not None else 0.0
        category = (reasons[0].code if reasons else ReasonCode.NOT_PLANNED).value
        said = "; ".join(r.message for r in reasons)
        if waited >= policy.hold_seconds:
            message = (
                f"optsched: deferred for {int(waited)}s, releasing quota and requeueing after "
                f"{policy.retry_after_seconds}s: " + said
            )
            out.actions.append(
                ident.action(
                    kind="release",
                    reason=category,
                    drop_record=record is not None,
                    check=update("Retry", message, requeue_after_seconds=policy.retry_after_seconds),
                )
            )
            continue
        message = "optsched: waiting: " + said
        if record is not None or entry.message != _message(message):
            out.actions.append(
                ident.action(
                    kind="defer",
                    reason=category,
                    drop_record=record is not None,
                    check=update("Pending", message),
                )
            )
        else:
            out.actions.append(ident.action(kind="defer", reason=category))
    return out
