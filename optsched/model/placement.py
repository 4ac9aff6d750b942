"""A raw placement: which pod of which PodSet goes to which node and GPUs.

Every policy (the optimizer and the greedy baselines) produces one of these;
``optsched.planning.build.build_plan`` turns it into a :class:`~optsched.model.plan.Plan`
with summary and reasons, and ``optsched.validate.check_plan`` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PodAssignment:
    node: str
    gpus: tuple[int, ...] | None
    """GPU indices, or None where the node's free indices are unknown."""


@dataclass
class WorkloadAssignment:
    """Placement of one admitted workload: PodSet name -> pods in index order."""

    pods: dict[str, list[PodAssignment]] = field(default_factory=dict)
    flavors: dict[str, str | None] = field(default_factory=dict)
    """PodSet name -> ResourceFlavor used (None where no flavor applies)."""


@dataclass
class Placement:
    """Admitted workloads by ``namespace/name``; everything else pending is deferred."""

    admitted: dict[str, WorkloadAssignment] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Workload key -> policy-specific reasons for a deferral (added to the plan's reasons)."""
