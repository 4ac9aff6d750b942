"""The rules that carry a plan's MIG layout changes out, and hold the workloads that wait for them.

Pure: the plan, the workload views and each node's :class:`~optsched.controller.mig_nodes.MigNode`
in, one :class:`MigDecisions` value out. Per node and cycle at most one write
(:class:`NodeMigWrite`: the whole ``spec.migLayout`` list and our record, onto the
resourceVersion read), so a write either lands whole or fails whole and the next
cycle decides again on a fresh read.

For each change the controller wrote (its record on the NodeGPUs):

* **applied**: the GPU reports the new layout and the Node advertises its
  slices: the record is removed; the workloads are admitted by the plan, which
  now sees the instances;
* **failed**: the agent answered this generation with ``Failed``: reported once
  (a Warning Event on the NodeGPUs and on each workload, the agent's message
  quoted); the entry stays, so the snapshot holds the GPU and the planner leaves
  it alone, and the workloads are planned again at once. The entry is restored
  to the current layout when another change is written on that node (the agent
  answers for the whole object and would retry it with the new one);
* **dropped**: not started by the agent (not ``Applying`` for this generation)
  and either no workload it was written for still waits (deleted, finished,
  admitted elsewhere) or it waited longer than ``timeout`` seconds: its entry is
  restored to the GPU's current layout;
* otherwise **in flight**: its workloads are held with our check Pending and a
  message saying what the change is waiting for.

Then the plan's new changes are written, except where the GPU's spec already
asks for another layout or the plan was made on a layout the GPU no longer has;
every workload the plan admits onto slices that do not exist yet is held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from optsched.controller.events import EventReason
from optsched.controller.mig_nodes import (
    MIG_CHANGES_ANNOTATION,
    ChangeRecord,
    Layout,
    MigNode,
    as_instances,
    records_annotation,
    shown,
)
from optsched.controller.views import WorkloadView
from optsched.model.events import Event, EventType
from optsched.model.mig import MigChange
from optsched.model.names import MIG_PREFIX, NODE_GPUS_API, NODE_GPUS_KIND
from optsched.model.plan import Plan, WorkloadDecision
from optsched.model.snapshot import CheckState

HOLD_PREFIX = "optsched: waits for the MIG layout of "
WAITING = (CheckState.PENDING, CheckState.RETRY)


class Outcome:
    """What happened to a layout change: the label of ``optsched_mig_layout_changes``."""

    WRITTEN = "written"
    APPLIED = "applied"
    FAILED = "failed"
    DROPPED = "dropped"


@dataclass(frozen=True)
class NodeMigWrite:
    """One node's patch: the whole ``spec.migLayout`` and our record, onto the resourceVersion read."""

    node: str
    uid: str
    resource_version: str
    spec: tuple[tuple[int, Layout], ...] | None
    """The new ``spec.migLayout`` by GPU (None: unchanged)."""
    record: str | None
    """The new record annotation (None: removed)."""
    outcomes: tuple[tuple[str, int], ...] = ()
    """``(outcome, gpu)`` per change this write carries out: counted once it is written."""
    events: tuple[Event, ...] = ()
    """Sent once it is written."""

    def patch(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"annotations": {MIG_CHANGES_ANNOTATION: self.record}}
        if self.uid:
            meta["uid"] = self.uid
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        body: dict[str, Any] = {"metadata": meta}
        if self.spec is not None:
            body["spec"] = {"migLayout": [{"gpu": g, "instances": as_instances(to)} for g, to in self.spec]}
        return body


@dataclass(frozen=True)
class MigDecisions:
    writes: tuple[NodeMigWrite, ...] = ()
    holds: Mapping[str, str] = field(default_factory=dict)
    """Workload key -> the message its check stays Pending with."""
    in_flight: int = 0
    """Changes of ours written and not applied, failed or dropped yet."""


def _waits(view: WorkloadView | None, uid: str) -> bool:
    """The workload a change was written for still waits (the same object, not a namesake)."""
    return (
        view is not None
        and view.uid == uid
        and view.live
        and view.check is not None
        and view.check.state in WAITING
    )


def _layout(slots: Iterable[Any]) -> Layout:
    return tuple(sorted(((s.profile, s.start) for s in slots), key=lambda p: (p[1], p[0])))


@dataclass
class _Node:
    """One node's decisions as they are made."""

    node: MigNode
    now: float
    spec: dict[int, Layout] = field(default_factory=dict)
    records: dict[int, ChangeRecord] = field(default_factory=dict)
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    holds: dict[str, dict[int, str]] = field(default_factory=dict)
    in_flight: int = 0

    def event(self, reason: str, message: str, kind: EventType = EventType.NORMAL) -> None:
        n = self.node
        self.events.append(Event(NODE_GPUS_KIND, NODE_GPUS_API, "", n.name, n.uid, reason, message, kind))

    def hold(self, keys: Iterable[str], gpu: int, state: str) -> None:
        for key in keys:
            self.holds.setdefault(key, {})[gpu] = state

    def state(self, gpu: int, *, written: bool = False) -> str:
        """What a change in flight waits for, in words."""
        n = self.node
        if written:
            return "written to its NodeGPUs spec.migLayout, waiting for the node agent"
        if not n.answered:
            return "waiting for the node agent to take the change up"
        if n.state == "Applying":
            return "the node agent is applying it"
        return f"the node agent says {n.state}" + (f" ({n.message})" if n.message else "")

    def restore(self, gpu: int, outcome: str | None, message: str) -> None:
        if gpu in self.node.current:
            self.spec[gpu] = self.node.now(gpu)
        else:
            # The agent reports no MIG layout for it now: an empty entry would ask for MIG and no
            # instances, so the entry goes (absent: the agent leaves the GPU alone).
            self.spec.pop(gpu, None)
        self.records.pop(gpu, None)
        if outcome is not None:
            self.outcomes.append((outcome, gpu))
            self.event("MIGLayoutChangeDropped", message)


def _follow(acc: _Node, record: ChangeRecord, workloads: Mapping[str, WorkloadView], timeout: float) -> None:
    """One recorded change: applied, failed, dropped or still in flight."""
    n, gpu = acc.node, record.gpu
    where = f"node {n.name} GPU {gpu}"
    if n.desired(gpu) != record.to:
        acc.records.pop(gpu)  # the spec was changed by someone else: the change is no longer ours
        return
    if n.now(gpu) == record.to:
        if n.advertises(record.to):
            acc.records.pop(gpu)
            acc.outcomes.append((Outcome.APPLIED, gpu))
            acc.event("MIGLayoutChangeApplied", f"{where}: MIG layout {shown(record.to)} applied")
            return
        wanted = ", ".join(sorted({MIG_PREFIX + p for p, _ in record.to}))
        acc.hold(record.workloads, gpu, f"applied, waiting for the node to advertise {wanted}")
        acc.in_flight += 1
        return
    if n.failed:
        if record.failed_generation != n.generation:
            acc.records[gpu] = replace(record, failed_generation=n.generation)
            acc.outcomes.append((Outcome.FAILED, gpu))
            message = (
                f"{where}: the node agent could not apply MIG layout {shown(record.to)}: {n.message}; "
                "the GPU keeps its layout and the workloads it was for are planned again"
            )
            acc.event("MIGLayoutChangeFailed", message, EventType.WARNING)
            acc.events.extend(_workload_events(record, workloads, message))
        return
    waiting = [k for k, uid in record.workloads.items() if _waits(workloads.get(k), uid)]
    if n.applying and n.silent(acc.now, timeout):
        # An agent that said Applying and then went quiet for the whole start timeout is gone (or
        # its node is): the change is dropped and its workloads planned again.
        message = f"{where}: MIG layout change dropped, the node agent has been silent for {timeout:.0f}s"
        acc.restore(gpu, Outcome.DROPPED, message)
    elif not n.applying and not waiting:
        acc.restore(gpu, Outcome.DROPPED, f"{where}: MIG layout change dropped, no workload waits for it")
    elif not n.applying and acc.now - record.written_at > timeout:
        message = f"{where}: MIG layout change dropped, the node agent did not start it in {timeout:.0f}s"
        acc.restore(gpu, Outcome.DROPPED, message)
    else:
        acc.hold(waiting, gpu, acc.state(gpu))
        acc.in_flight += 1


def _workload_events(
    record: ChangeRecord, workloads: Mapping[str, WorkloadView], message: str
) -> list[Event]:
    out = []
    for key, uid in sorted(record.workloads.items()):
        view = workloads.get(key)
        if view is not None and view.uid == uid:
            out.append(
                Event(
                    "Workload",
                    view.api_version or "kueue.x-k8s.io/v1beta2",
                    view.namespace,
                    view.name,
                    view.uid,
                    EventReason.MIG_LAYOUT_FAILED,
                    message,
                    EventType.WARNING,
                )
            )
    return out


def _write(acc: _Node, change: MigChange, served: Mapping[str, str]) -> bool:
    """One planned change: written, merged into the same change in flight, or refused (its workloads
    held with why). True when it was written now."""
    n, gpu, to = acc.node, change.gpu, _layout(change.to)
    record, desired, current = acc.records.get(gpu), acc.spec.get(gpu), n.now(gpu)
    if record is not None and record.to == to:
        acc.records[gpu] = replace(record, workloads={**record.workloads, **served})
        return False
    if desired is not None and desired not in (current, to):
        acc.hold(served, gpu, f"another layout change ({shown(desired)}) is in flight on it")
        return False
    if _layout(change.from_) != current:
        acc.hold(
            served, gpu, f"it has layout {shown(current)}, not the planned {shown(_layout(change.from_))}"
        )
        return False
    acc.spec[gpu] = to
    acc.records[gpu] = ChangeRecord(gpu=gpu, to=to, workloads=dict(served), written_at=acc.now)
    acc.outcomes.append((Outcome.WRITTEN, gpu))
    who = ", ".join(sorted(served)) or "no workload"
    acc.event(
        "MIGLayoutChangeWritten",
        f"node {n.name} GPU {gpu}: MIG layout {shown(current)} -> {shown(to)} for {who}",
    )
    acc.hold(served, gpu, acc.state(gpu, written=True))
    return True


def _served(plan: Plan, views: Mapping[str, WorkloadView]) -> dict[tuple[str, int], dict[str, str]]:
    """(node, GPU) of each planned change -> the admitted workloads (key -> uid) whose pods need it."""
    changed: dict[str, set[int]] = {}
    for change in plan.mig_changes:
        changed.setdefault(change.node, set()).add(change.gpu)
    out: dict[tuple[str, int], dict[str, str]] = {}
    for decision in plan.admitted:
        view = views.get(decision.name)
        for node in decision.waits_for_layout:
            for gpu in _gpus_needed(decision, node, changed.get(node, set())):
                out.setdefault((node, gpu), {})[decision.name] = view.uid if view is not None else ""
    return out


def _gpus_needed(decision: WorkloadDecision, node: str, changed: set[int]) -> set[int]:
    """The changed GPUs of ``node`` the decision's pods sit on (all of them where the pods do not say)."""
    used = {g for ps in decision.pod_sets for p in ps.pods if p.node == node for g in p.gpus or ()}
    return (used & changed) or changed


def _followed(node: MigNode, workloads: Mapping[str, WorkloadView], now: float, timeout: float) -> _Node:
    acc = _Node(node=node, now=now, spec=dict(node.spec or {}), records=dict(node.records))
    for record in sorted(node.records.values(), key=lambda r: r.gpu):
        _follow(acc, record, workloads, timeout)
    return acc


def _write_planned(
    acc: _Node, planned: list[MigChange], served: Mapping[tuple[str, int], Mapping[str, str]]
) -> None:
    """The plan's changes on this node; our failed entries are restored where a change is written."""
    node = acc.node
    if node.spec_problem is not None:
        for change in planned:
            acc.hold(served.get((node.name, change.gpu), {}), change.gpu, f"its {node.spec_problem}")
        return
    written = False
    for change in sorted(planned, key=lambda c: c.gpu):
        who = served.get((node.name, change.gpu), {})
        if who:
            written = _write(acc, change, who) or written
    if written:
        for gpu, record in sorted(acc.records.items()):
            if record.failed_generation and record.failed_generation == node.generation:
                acc.restore(gpu, None, "")


def _unknown_nodes(plan: Plan, nodes: Mapping[str, MigNode]) -> dict[str, list[str]]:
    """Workloads admitted onto layout changes of nodes without a NodeGPUs: held, with why."""
    out: dict[str, list[str]] = {}
    for decision in plan.admitted:
        for node in decision.waits_for_layout:
            if node not in nodes:
                out.setdefault(decision.name, []).append(f"node {node}: it has no NodeGPUs object to ask")
    return out


def mig_decisions(
    nodes: Mapping[str, MigNode],
    plan: Plan | None,
    workloads: Mapping[str, WorkloadView],
    *,
    now: float,
    timeout: float,
) -> MigDecisions:
    """This cycle's layout writes and the workloads held for them (``plan`` None: follow changes only)."""
    planned: dict[str, list[MigChange]] = {}
    for change in plan.mig_changes if plan is not None else ():
        planned.setdefault(change.node, []).append(change)
    served = _served(plan, workloads) if plan is not None else {}
    holds: dict[str, list[str]] = _unknown_nodes(plan, nodes) if plan is not None else {}
    accs = [_followed(nodes[name], workloads, now, timeout) for name in sorted(nodes)]
    # A workload already waiting for a change in flight gets no second one: the planner cannot see
    # the slices on their way, so it may place it elsewhere meanwhile.
    waiting = {key for acc in accs for key in acc.holds}
    fresh = {where: {k: u for k, u in who.items() if k not in waiting} for where, who in served.items()}
    writes, in_flight = [], 0
    for acc in accs:
        name = acc.node.name
        _write_planned(acc, planned.get(name, []), fresh)
        in_flight += acc.in_flight
        for key, states in acc.holds.items():
            holds.setdefault(key, []).extend(f"node {name} GPU {g}: {s}" for g, s in sorted(states.items()))
        write = _node_write(acc)
        if write is not None:
            writes.append(write)
    if plan is not None:
        for decision in plan.admitted:
            if decision.waits_for_layout and decision.name not in holds:
                nodes_named = ", ".join(decision.waits_for_layout)
                holds[decision.name] = [f"node {nodes_named}: the plan names no change there"]
    messages = {key: HOLD_PREFIX + "; ".join(lines) for key, lines in holds.items()}
    return MigDecisions(writes=tuple(writes), holds=messages, in_flight=in_flight)


def _node_write(acc: _Node) -> NodeMigWrite | None:
    node = acc.node
    spec_changed = acc.spec != dict(node.spec or {})
    record = records_annotation(acc.records.values())
    record_changed = record != records_annotation(node.records.values()) or node.record_problem is not None
    if not spec_changed and not record_changed:
        return None
    return NodeMigWrite(
        node=node.name,
        uid=node.uid,
        resource_version=node.resource_version,
        spec=tuple(sorted(acc.spec.items())) if spec_changed else None,
        record=record,
        outcomes=tuple(acc.outcomes),
        events=tuple(acc.events),
    )
