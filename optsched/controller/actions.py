"""The values one cycle decides: check updates, workload actions, and what every rule reads.

Shared by the rules for workloads still waiting (``decide``) and those for
workloads already Ready (``repair``); the cycle's last phase (``act``) sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from optsched.controller.claim_sweep import OwnedClaim
from optsched.controller.dra_repair import DraState
from optsched.controller.inputs import NodePresence
from optsched.controller.mig_decide import MigDecisions
from optsched.controller.options import DeferPolicy
from optsched.controller.pinning import PodPin
from optsched.controller.read_back import ReadBack
from optsched.controller.records import PlacementRecord
from optsched.controller.views import PodView, WorkloadView
from optsched.kueue import workload_status as ks
from optsched.kueue.workload_status import CheckEntry
from optsched.model.events import Event, EventType
from optsched.model.names import KUEUE_API
from optsched.model.reasons import ReasonCode
from optsched.model.snapshot import CheckState, Node

MAX_MESSAGE = 1024


class ActionKind(StrEnum):
    ADMIT = "admit"
    DEFER = "defer"
    RELEASE = "release"
    """Deferred past the hold time: Retry, so Kueue releases the quota and requeues."""
    REJECT = "reject"
    """Can never be planned (malformed, impossible, placed by Kueue TAS): Rejected, quota released."""
    DROP_RECORD = "drop-record"
    REPLAN = "replan"
    """A Ready workload's pins cannot come true (node gone, record lost): Retry, to be planned again."""
    RESET = "reset"
    """A Ready check on a workload Kueue no longer reserves quota for: back to Pending, record dropped."""
    SYNC = "sync"
    """Our checks on one workload disagree (one Ready, the others Pending): Ready is copied to the rest."""
    WAIT_LAYOUT = "wait-layout"
    """Planned onto MIG slices that do not exist yet: Pending until the node's layout change is applied."""


@dataclass(frozen=True)
class CheckUpdate:
    """Our entries of ``status.admissionChecks`` as they should be after this cycle."""

    check: str
    state: CheckState
    message: str
    last_transition_time: str
    pod_set_updates: tuple[dict[str, Any], ...] = ()
    requeue_after_seconds: int | None = None
    also: tuple[str, ...] = ()
    """Other checks of ours on the same workload: they get the same state."""
    resource_version: str = ""
    """The Workload's resourceVersion the decision was made on (a precondition of Ready)."""

    def entry(self, name: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": name or self.check,
            "state": self.state.value,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.pod_set_updates:
            out["podSetUpdates"] = [dict(u) for u in self.pod_set_updates]
        if self.requeue_after_seconds is not None:
            out["requeueAfterSeconds"] = self.requeue_after_seconds
        return out

    def entries(self) -> list[dict[str, Any]]:
        """An entry per check of ours on the workload; podSetUpdates on the first only (Kueue merges them)."""
        rest = [{k: v for k, v in self.entry(n).items() if k != "podSetUpdates"} for n in self.also]
        return [self.entry(), *rest]


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
    resource_version: str = ""
    """The Workload's resourceVersion as read: the record is written only onto that version."""
    settles: tuple[str, str] | None = None
    """The claim conflict (namespace, plan id) this Retry answers: forgotten once it is written."""

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
    ungates: tuple[PodPin, ...] = ()
    """Pods of queues that are not ours: our gate is lifted, nothing else changes."""
    sweeps: tuple[OwnedClaim, ...] = ()
    """optsched's ResourceClaims whose owner pod is gone (past the grace period): deleted."""
    mig: MigDecisions = field(default_factory=MigDecisions)
    """MIG layout changes to write on NodeGPUs, and the workloads held for them."""

    def of_kind(self, kind: ActionKind | str) -> list[WorkloadAction]:
        return [a for a in self.actions if a.kind == kind]


@dataclass(frozen=True)
class Facts:
    """What every rule reads besides the workload itself."""

    now: datetime
    policy: DeferPolicy
    nodes: Mapping[str, Node]
    """The nodes the snapshot could plan on."""
    present: Mapping[str, NodePresence]
    """Every Node listed, planable or not."""
    flavor_labels: Mapping[str, Mapping[str, str]]
    pods: Mapping[tuple[str, str], Sequence[PodView]]
    """Pods by namespace and plan id."""
    whole: bool = True
    """Every listed node is Ready, uncordoned and planned on: only then can "never fits" be believed."""
    claim_conflicts: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, plan id) -> why a slot's ResourceClaim cannot be the slot's (DRA mode): re-plan."""
    read_back: ReadBack = field(default_factory=ReadBack)
    """The GPUs node agents report each bound pod holds."""
    dra: DraState = field(default_factory=DraState)
    """DRA nodes' published GPUs and the devices claims hold."""
    mig_holds: Mapping[str, str] = field(default_factory=dict)
    """Workload key -> why it waits for a MIG layout change (its check stays Pending with it)."""

    @property
    def stamp(self) -> str:
        return ks.format_time(self.now)


def action(view: WorkloadView, kind: ActionKind, **fields: Any) -> WorkloadAction:
    return WorkloadAction(
        namespace=view.namespace,
        name=view.name,
        uid=view.uid,
        kind=kind,
        resource_version=view.resource_version,
        **fields,
    )


def event(view: WorkloadView, reason: str, message: str, type: EventType = EventType.NORMAL) -> Event:
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


def one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def update(
    view: WorkloadView, check: CheckEntry, state: CheckState, message: str, facts: Facts, **extra: Any
) -> CheckUpdate:
    """Our entries in ``state``, written onto the Workload version read; the transition time moves
    only when the state does."""
    extra.setdefault("resource_version", view.resource_version)
    same = check.state == state and check.last_transition_time
    return CheckUpdate(
        check=check.name,
        state=state,
        message=one_line(message),
        last_transition_time=check.last_transition_time if same else facts.stamp,
        also=tuple(n for n in view.checks if n != check.name),
        **extra,
    )
