"""Where pods go: one pod to one node and GPUs, and the raw placement every policy produces.

:class:`PodPlacement` is the one "pod -> node + GPUs" value: policies place
pods with it, the :class:`~optsched.model.plan.Plan` lists it, and the
controller's placement record on a Workload stores it, so a placement is never
converted between look-alike types on its way from the solver to a pinned pod.
A :class:`Placement` is what a policy decides;
``optsched.planning.build.build_plan`` turns it into the plan people read and
``optsched.validate.check_plan`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Enforcement(StrEnum):
    """What makes a pod's container get the GPUs its plan names.

    ``dra``: a ResourceClaim selects exactly those devices by UUID and
    kube-scheduler's DRA allocator can allocate nothing else (it fails
    closed). ``predicted``: a device-plugin node, where the plan is what
    NVIDIA's best-effort allocator will pick on the node's free GPUs, checked
    by the node agent's read-back. ``none``: the node is pinned, the GPUs are
    left to the node (shares, MIG slices, GPUs of unknown index, HAMi).
    """

    DRA = "dra"
    PREDICTED = "predicted"
    NONE = "none"


class PodPlacement(BaseModel):
    """One planned pod: its index inside its PodSet, its node, its GPUs and how they are enforced."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    index: int = Field(ge=0)
    node: str = Field(min_length=1)
    gpus: tuple[int, ...] | None = None
    """GPU indices (for display, and on device-plugin nodes); ``None`` where the node's free indices are
    not known (left to the node)."""
    gpu_uuids: tuple[str, ...] | None = Field(default=None, alias="gpuUUIDs")
    """The same GPUs by UUID, in the order of ``gpus``, where the node names its GPUs' UUIDs."""
    enforcement: Enforcement | None = None
    """How the GPUs are enforced; ``None`` before the plan is built (a policy's raw placement)."""
    node_order: int | None = None
    """On a device-plugin node: this pod's place (0 first) in the order its plan's pods there must get
    their GPUs for the predicted choice to hold; the controller ungates them one at a time in it."""


@dataclass
class WorkloadAssignment:
    """Placement of one admitted workload: PodSet name -> pods in index order."""

    pods: dict[str, list[PodPlacement]] = field(default_factory=dict)
    flavors: dict[str, str | None] = field(default_factory=dict)
    """PodSet name -> ResourceFlavor used (None where no flavor applies)."""


@dataclass
class Placement:
    """Admitted workloads by ``namespace/name``; everything else pending is deferred."""

    admitted: dict[str, WorkloadAssignment] = field(default_factory=dict)
    mig_layouts: dict[tuple[str, int], tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """(node, GPU index) -> the ``(profile, start)`` instances it gets, for every GPU whose MIG
    layout changes; the admitted pods' MIG requests count against the new layouts."""
