"""The reasons of the Events the controller emits (the value: ``optsched.model.events.Event``).

Reasons are CamelCase words, as Kueue's and the kubelet's are: ``Invalid<Kind>``
for an object that could not be used, the binding reason's code
(:class:`~optsched.model.reasons.ReasonCode`) when a deferred workload's quota
is sent back, and the words below for the other changes of our check that a
person should see on the Workload. Admissions need none: Kueue reports them.
"""

from __future__ import annotations

from enum import StrEnum


class EventReason(StrEnum):
    """Reasons of Events about our check where no reason code of the plan applies."""

    PLANNED_NODE_LOST = "PlannedNodeLost"
    """A planned node went away before the pods bound; the workload is sent back to be planned again."""
