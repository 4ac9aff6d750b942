"""Could Kueue admit this Workload at all? Its queues, their state and its namespace decide.

Kueue reserves quota for a Workload only through an existing LocalQueue that is
not stopped, pointing at an existing ClusterQueue that is active (not stopped,
not terminating, every ResourceFlavor and AdmissionCheck it names exists and
each check is active) and whose ``namespaceSelector`` selects the Workload's
namespace. A Workload that fails this waits in Kueue with a condition saying
why; optsched holds it out of planning with the same words (Kueue's workload
controller and scheduler texts), so no plan promises capacity to work Kueue
will not start, and ``--explain`` names the missing object.

A Workload that already holds a quota reservation passed these checks when it
got it; Kueue then releases the reservation only when its LocalQueue or
ClusterQueue is gone or stopped, and cannot admit it while an AdmissionCheck of
its ClusterQueue is missing or inactive. Only those are checked for it, with
Kueue's texts for a released reservation.

Only kinds the source listed are checked for missing objects: without a single
LocalQueue in the snapshot nothing is checked (a nodes-and-workloads dump plans
as it always did); without AdmissionCheck or ResourceFlavor objects, the ones a
ClusterQueue names are taken to exist, with one warning each. A labelled
``namespaceSelector`` whose Namespace object is missing is taken to select the
namespace, with a warning: a Workload exists only in a namespace that exists,
so the dump is merely incomplete, and Kueue itself never reserves quota for an
unselected namespace, so the controller can never admit one wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from optsched.model.admission import (
    AdmissionFacts,
    ClusterQueueState,
    LocalQueueState,
    implicit_namespace_labels,
)
from optsched.model.names import NAMESPACE_NAME_LABEL
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import ClusterQueue, HeldWorkload, Snapshot, Workload

NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"
"""Kueue's own text (``workload.ErrNamespaceMismatch``)."""
NO_LOCAL_QUEUES = (
    "the snapshot holds ClusterQueues but no LocalQueue: which queue each Workload is in is unknown, "
    "so their queues' state and quota are not checked"
)


@dataclass(frozen=True)
class Verdict:
    """Kueue's answer for one Workload: None when it could be admitted, and what could not be verified."""

    reason: Reason | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Ask:
    """One Workload's question, with what every step reads."""

    workload: Workload
    snapshot: Snapshot
    facts: AdmissionFacts
    own_checks: frozenset[str]

    @property
    def reserved(self) -> bool:
        return self.workload.reservation is not None


def judge(
    workload: Workload, snapshot: Snapshot, facts: AdmissionFacts, own_checks: Iterable[str] = ()
) -> Verdict:
    """Whether Kueue could admit ``workload`` as the queue objects stand, and Kueue's reason if not.

    ``own_checks`` are AdmissionChecks known to exist and be active whatever
    the source says (the controller's own).
    """
    if not facts.holds("LocalQueue"):
        return Verdict()
    ask = _Ask(workload, snapshot, facts, frozenset(own_checks))
    found = _local_queue(ask)
    if isinstance(found, Reason):
        return Verdict(found)
    if not facts.holds("ClusterQueue"):
        return Verdict()
    return _cluster_queue(ask, found)


def hold_inadmissible(
    snapshot: Snapshot,
    facts: AdmissionFacts,
    *,
    own_checks: Iterable[str] = (),
    warnings: Iterable[str] = (),
) -> Snapshot:
    """The snapshot with every Workload Kueue could not admit moved from ``workloads`` to ``held``.

    ``warnings`` (from reading the facts) and what could not be verified are
    added to the snapshot's warnings, each once.
    """
    own = frozenset(own_checks)
    verdicts = {w.key: judge(w, snapshot, facts, own) for w in snapshot.workloads}
    notes = [*warnings, *(note for verdict in verdicts.values() for note in verdict.notes)]
    if snapshot.workloads and facts.holds("ClusterQueue") and not facts.holds("LocalQueue"):
        notes.append(NO_LOCAL_QUEUES)
    return hold_where(snapshot, lambda workload: verdicts[workload.key].reason, notes=notes)


def hold_where(
    snapshot: Snapshot, reason_of: Callable[[Workload], Reason | None], *, notes: Iterable[str] = ()
) -> Snapshot:
    """The snapshot with each pending Workload ``reason_of`` gives a reason for moved to ``held``.

    ``notes`` are added to the snapshot's warnings, each once; the snapshot is
    returned as it is when nothing changes.
    """
    keep: list[Workload] = []
    held: list[HeldWorkload] = []
    for workload in snapshot.workloads:
        reason = reason_of(workload)
        if reason is None:
            keep.append(workload)
        else:
            held.append(HeldWorkload(workload=workload, reason=reason))
    new = [n for n in dict.fromkeys(notes) if n not in snapshot.warnings]
    if not held and not new:
        return snapshot
    return snapshot.model_copy(
        update={
            "workloads": tuple(keep),
            "held": (*snapshot.held, *held),
            "warnings": (*snapshot.warnings, *new),
        }
    )


def _local_queue(ask: _Ask) -> Reason | LocalQueueState:
    """The Workload's LocalQueue, or why Kueue cannot admit through it."""
    workload = ask.workload
    name = workload.queue_name
    if not name:
        return Reason(
            code=ReasonCode.NO_QUEUE_NAME,
            message="spec.queueName is empty: the Workload is in no LocalQueue, so Kueue never admits it",
            scope="spec.queueName",
        )
    scope = f"LocalQueue {workload.namespace}/{name}"
    lq = ask.facts.local_queue(workload.namespace, name)
    if lq is None or (ask.reserved and lq.terminating):
        said = "is terminating or missing" if ask.reserved else "doesn't exist"
        return Reason(code=ReasonCode.QUEUE_NOT_FOUND, message=f"LocalQueue {name} {said}", scope=scope)
    if lq.stop_policy != "None":
        said = "is stopped" if ask.reserved else "is inactive"
        return Reason(
            code=ReasonCode.LOCAL_QUEUE_INACTIVE,
            message=f"LocalQueue {name} {said} (spec.stopPolicy {lq.stop_policy})",
            scope=scope,
        )
    return lq


def _cluster_queue(ask: _Ask, lq: LocalQueueState) -> Verdict:
    """The LocalQueue's ClusterQueue: it exists, is active and selects the Workload's namespace."""
    name = lq.cluster_queue
    if not name:
        return Verdict(
            Reason(
                code=ReasonCode.CLUSTER_QUEUE_NOT_FOUND,
                message=f"LocalQueue {lq.name} names no ClusterQueue (spec.clusterQueue is empty)",
                scope=f"LocalQueue {lq.key}",
            )
        )
    state = ask.facts.cluster_queues.get(name)
    if state is None or (ask.reserved and state.terminating):
        said = "is terminating or missing" if ask.reserved else "doesn't exist"
        return Verdict(
            Reason(
                code=ReasonCode.CLUSTER_QUEUE_NOT_FOUND,
                message=f"ClusterQueue {name} {said}",
                scope=f"ClusterQueue {name}",
                cluster_queue=name,
            )
        )
    inactive, notes = _inactive(ask, state, ask.snapshot.cluster_queue(name))
    if inactive is not None or ask.reserved:
        return Verdict(inactive, notes)
    selected, more = _namespace(ask, state)
    return Verdict(selected, (*notes, *more))


@dataclass(frozen=True)
class _Problem:
    """One cause of an inactive ClusterQueue, as Kueue's ``Active`` condition states it."""

    kueue_reason: str
    text: str
    scope: str
    flavor: str | None = None


def _inactive(
    ask: _Ask, state: ClusterQueueState, cq: ClusterQueue | None
) -> tuple[Reason | None, tuple[str, ...]]:
    """Why the ClusterQueue is inactive (Kueue's order and words), and what could not be verified."""
    name = state.name
    if state.terminating and not ask.reserved:
        return _inactive_reason(
            name, "Terminating", "Can't admit new workloads; clusterQueue is terminating"
        ), ()
    if state.stop_policy != "None" and ask.reserved:
        return _reason(ReasonCode.CLUSTER_QUEUE_INACTIVE, f"ClusterQueue {name} is stopped", name), ()
    problems: list[_Problem] = []
    if state.stop_policy != "None":
        problems.append(_Problem("Stopped", "is stopped", f"ClusterQueue {name}"))
    notes: list[str] = []
    if cq is not None:
        if not ask.reserved:
            problems += _flavor_problems(ask.facts, cq, notes)
        problems += _check_problems(ask, cq, notes)
    if problems:
        first = problems[0]
        text = f"Can't admit new workloads: {', '.join(p.text for p in problems)}."
        return _inactive_reason(
            name, first.kueue_reason, text, scope=first.scope, flavor=first.flavor
        ), tuple(notes)
    if state.active is not None and state.active.inactive and not ask.reserved:
        said = state.active.message or "Can't admit new workloads."
        return _inactive_reason(name, state.active.reason or "Unknown", said), tuple(notes)
    return None, tuple(notes)


def _flavor_problems(facts: AdmissionFacts, cq: ClusterQueue, notes: list[str]) -> list[_Problem]:
    named = list(dict.fromkeys(f.name for group in cq.resource_groups for f in group.flavors))
    if not named:
        return []
    if not facts.holds("ResourceFlavor"):
        notes.append(
            f"ClusterQueue {cq.name} uses ResourceFlavor(s) {', '.join(named)}, which cannot be verified: "
            "the snapshot holds no ResourceFlavor objects; they are taken to exist"
        )
        return []
    missing = [f for f in named if f not in facts.flavors]
    if not missing:
        return []
    text = f"references missing ResourceFlavor(s): {','.join(missing)}"
    return [_Problem("FlavorNotFound", text, f"ResourceFlavor {missing[0]}", flavor=missing[0])]


def _check_problems(ask: _Ask, cq: ClusterQueue, notes: list[str]) -> list[_Problem]:
    named = [c for c in dict.fromkeys(cq.admission_checks) if c not in ask.own_checks]
    if not named:
        return []
    facts = ask.facts
    if not facts.holds("AdmissionCheck"):
        notes.append(
            f"ClusterQueue {cq.name} requires AdmissionCheck(s) {', '.join(named)}, which cannot be "
            "verified: the snapshot holds no AdmissionCheck objects; they are taken to exist and be active"
        )
        return []
    missing = [c for c in named if c not in facts.admission_checks]
    inactive = [
        c
        for c in named
        if c in facts.admission_checks
        and (active := facts.admission_checks[c].active) is not None
        and active.inactive
    ]
    problems = []
    if missing:
        text = f"references missing AdmissionCheck(s): {','.join(missing)}"
        problems.append(_Problem("AdmissionCheckNotFound", text, f"AdmissionCheck {missing[0]}"))
    if inactive:
        text = f"references inactive AdmissionCheck(s): {','.join(inactive)}"
        problems.append(_Problem("AdmissionCheckInactive", text, f"AdmissionCheck {inactive[0]}"))
    return problems


def _namespace(ask: _Ask, state: ClusterQueueState) -> tuple[Reason | None, tuple[str, ...]]:
    """Kueue's namespace check: a nil selector selects nothing, ``{}`` everything, else by labels."""
    namespace, name = ask.workload.namespace, state.name
    selector = state.namespace_selector
    if selector is None:
        detail = (
            f"ClusterQueue {name} has no spec.namespaceSelector, which selects no namespace; {{}} selects all"
        )
        return _namespace_reason(namespace, name, detail), ()
    if selector.empty:
        return None, ()
    labels = ask.facts.namespace_labels(namespace)
    if labels is None:
        if not selector.keys <= {NAMESPACE_NAME_LABEL}:
            note = (
                f"ClusterQueue {name} selects namespaces by label ({selector.describe()}) and the snapshot "
                f"holds no Namespace {namespace}: {namespace} is taken as selected"
            )
            return None, (note,)
        labels = implicit_namespace_labels(namespace)
    if selector.matches(labels):
        return None, ()
    detail = f"ClusterQueue {name} selects {selector.describe()}; Namespace {namespace} does not match"
    return _namespace_reason(namespace, name, detail), ()


def _namespace_reason(namespace: str, cluster_queue: str, detail: str) -> Reason:
    return Reason(
        code=ReasonCode.NAMESPACE_NOT_SELECTED,
        message=f"{NAMESPACE_MISMATCH} ({detail})",
        scope=f"Namespace {namespace}",
        cluster_queue=cluster_queue,
    )


def _inactive_reason(
    name: str, kueue_reason: str, text: str, *, scope: str | None = None, flavor: str | None = None
) -> Reason:
    """Kueue's Workload text, then its ClusterQueue's ``Active`` condition reason and message."""
    message = f"ClusterQueue {name} is inactive ({kueue_reason}): {text}"
    return _reason(ReasonCode.CLUSTER_QUEUE_INACTIVE, message, name, scope=scope, flavor=flavor)


def _reason(
    code: ReasonCode, message: str, cluster_queue: str, *, scope: str | None = None, flavor: str | None = None
) -> Reason:
    return Reason(
        code=code,
        message=message,
        scope=scope or f"ClusterQueue {cluster_queue}",
        cluster_queue=cluster_queue,
        flavor=flavor,
    )
