"""Why a workload waits, as values: a code, the sentence a person reads, and the figures behind it.

The code is a CamelCase word in the style of Kueue's condition reasons, so
metrics, Events and scripts can count and match reasons without parsing the
sentence; the figures (what is needed, what is available, over which scope,
which admitted workloads took it) let a view or a person check the claim. The
plan carries one list of these per deferred workload, and every view (table,
JSON, YAML, HTML) and the controller render the same values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, field_validator, model_serializer
from pydantic.alias_generators import to_camel


class ReasonCode(StrEnum):
    """What blocks a workload. The first reason of a deferral names the binding constraint."""

    QUEUE_NOT_FOUND = "QueueNotFound"
    """Its LocalQueue does not exist (or, where no LocalQueue is listed, leads to no known ClusterQueue)."""
    NO_MATCHING_NODE = "NoMatchingNode"
    """Node filters (selectors, affinity, taints, flavor labels, GPU model or health) rule out every node."""
    POD_TOO_LARGE = "PodTooLarge"
    """One pod asks for more of a resource than any node its filters allow has: it can never run."""
    TOPOLOGY_UNSATISFIABLE = "TopologyUnsatisfiable"
    """No domain of the required topology level holds the gang (now, or ever when ``permanent``)."""
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    """The eligible nodes lack free GPUs, GPU shares, MIG slices, CPU, memory or pod slots for the gang."""
    GPUS_FRAGMENTED = "GPUsFragmented"
    """Enough GPUs are free in total, but too few on each node: not enough nodes hold a pod."""
    NVLINK_REQUIRED = "NVLinkRequired"
    """The pods would fit, but not each inside one NVLink island, which they require."""
    QUOTA_EXHAUSTED = "QuotaExhausted"
    """The ClusterQueue's quota (with what its cohort can lend) is used up for this flavor."""
    HIGHER_PRIORITY_FIRST = "HigherPriorityFirst"
    """Capacity went to higher-priority work admitted in this plan."""
    LOWER_IN_QUEUE = "LowerInQueue"
    """Capacity went to work of the same priority that is ahead in the queue."""
    CAPACITY_IN_USE = "CapacityInUse"
    """Running workloads hold the capacity; the gang would not fit even without this plan."""
    BETTER_OVERALL_PLAN = "BetterOverallPlan"
    """Capacity went to later work because that admits more in total."""
    WOULD_STRAND_GPUS = "WouldStrandGPUs"
    """Admitting it would leave GPUs on its nodes that no other pending pod could use."""
    BEYOND_PLANNING_WINDOW = "BeyondPlanningWindow"
    """Too far back in the queue to be planned this time."""
    POLICY_CHOICE = "PolicyChoice"
    """It fits what the plan leaves free, but the policy placed earlier work differently."""
    NOT_PLANNED = "NotPlanned"
    """The controller had no plan decision for it in this cycle."""
    INVALID_WORKLOAD = "InvalidWorkload"
    """The controller could not read the workload; the message says which field."""
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"
    """Its LocalQueue points at a ClusterQueue that does not exist."""
    LOCAL_QUEUE_INACTIVE = "LocalQueueInactive"
    """Its LocalQueue is stopped (``spec.stopPolicy``): Kueue admits nothing through it."""
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    """Its ClusterQueue is stopped, terminating, or names a missing ResourceFlavor or AdmissionCheck."""
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    """Its ClusterQueue's ``namespaceSelector`` does not select the workload's namespace."""
    NO_QUEUE_NAME = "NoQueueName"
    """``spec.queueName`` is empty: the workload is in no LocalQueue."""
    QUEUE_UNREADABLE = "QueueUnreadable"
    """Its LocalQueue or ClusterQueue could not be read, so its quota and state are unknown."""


class Reason(BaseModel):
    """One reason: ``{"code": ..., "message": ..., ...figures}``; unset figures are left out of output."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    code: ReasonCode
    message: str
    pod_set: str | None = None
    needed: int | float | None = None
    """What the workload (or the PodSet) needs, in ``unit``."""
    available: int | float | None = None
    """The most that is available within ``scope``, in ``unit``."""
    unit: str | None = None
    scope: str | None = None
    """Where ``available`` was measured: ``node``, ``eligible nodes``, a topology level's node label."""
    permanent: bool = False
    """True when no amount of waiting helps: the request can never be met by this cluster."""
    cluster_queue: str | None = None
    flavor: str | None = None
    resource: str | None = None
    """The Kubernetes resource that binds (``cpu``, ``nvidia.com/gpu``, a MIG profile, a quota's resource)."""
    cohort: str | None = None
    nominal: int | float | None = None
    borrowing_limit: int | float | None = None
    workloads: tuple[str, ...] = ()
    """Admitted workloads the capacity or quota went to, most relevant first."""
    excluded: dict[str, int] | None = None
    """Node filter -> nodes it rules out (``NoMatchingNode`` with the same filters in every flavor)."""

    @field_validator("needed", "available", "nominal", "borrowing_limit")
    @classmethod
    def _whole_numbers_as_int(cls, value: int | float | None) -> int | float | None:
        """``12`` rather than ``12.0`` in JSON: most figures count whole GPUs or pods."""
        return int(value) if isinstance(value, float) and value.is_integer() else value

    @model_serializer(mode="wrap")
    def _figures_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if not _unset(value)}


def _unset(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, tuple | list | dict) and not value)
