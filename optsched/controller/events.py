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
    PLACEMENT_LOST = "PlacementLost"
    """A Ready workload's placement record is missing, unreadable or altered; it is planned again."""
    PIN_UNSCHEDULABLE = "PinnedPodUnschedulable"
    """A pinned pod could not bind to its planned node for too long; the workload is planned again."""
    CLAIM_UNENFORCEABLE = "ClaimUnenforceable"
    """A pod's ResourceClaim name is held by a claim allocated to other devices; the workload is planned
    again."""
    PLANNED_GPU_UNAVAILABLE = "PlannedGPUUnavailable"
    """A GPU a pod's ResourceClaim selects is no longer published by its node's ResourceSlice (unhealthy,
    removed) or is held by another claim; the workload is planned again."""
    PREDICTION_BROKEN = "PredictedGPUsTaken"
    """The device plugin handed a pod's predicted NVLink island to another pod before it started; the
    workload is planned again."""
    QUOTA_LOST = "QuotaLost"
    """Our check was Ready on a workload without a quota reservation; reset to Pending."""
    MIG_LAYOUT_FAILED = "MIGLayoutChangeFailed"
    """The node agent could not apply the MIG layout this workload waited for; it is planned again."""
    REJECTED = "Rejected"
    """The workload can never be placed by optsched; the message says why."""
