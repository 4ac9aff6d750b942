"""Kubernetes Events the controller emits, as values: decided in the cycle, sent by its last phase.

Reasons are CamelCase words, as Kueue's and the kubelet's are: ``Invalid<Kind>``
for an object that could not be used, the binding reason's code
(:class:`~optsched.model.reasons.ReasonCode`) when a deferred workload's quota
is sent back, and the words below for the other changes of our check that a
person should see on the Workload. Admissions need none: Kueue reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class EventReason(StrEnum):
    """Reasons of Events about our check where no reason code of the plan applies."""

    PLANNED_NODE_LOST = "PlannedNodeLost"
    """A planned node went away before the pods bound; the workload is sent back to be planned again."""


@dataclass(frozen=True)
class Event:
    """One Event on one object (cluster-scoped objects have no namespace)."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    type: EventType = EventType.WARNING
