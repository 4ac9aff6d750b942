"""The lexicographic objective: which stage yields to which, in one list.

The solver optimises stage by stage (:mod:`optsched.solver.stages`). What is
admitted comes first, one stage per priority level, highest first: no
workload is deferred so that lower-priority work can take its place, and no
placement preference may cost an admission. How well the admitted work is
placed comes after, in the order of :data:`ORDER`. Modules only say which
stage a term belongs to; the position of a stage is decided here and nowhere
else, so a new preference is added by naming its place in this list.

Within a priority level each pod counts its GPUs in milli-GPUs (a MIG instance by
its compute slices, a 3g as 3/7 of a GPU) times
``1 + min(cap, per_hour * hours waited)`` (:func:`pod_value`); a CPU-only pod
counts one milli so it is still admitted when it fits. Separate stages per
level were chosen over big weights because the number of levels in a window
is small (usually two or three) and big weights would make the reported gap
meaningless.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest
from optsched.settings import AgeingSettings

LinearExpr = cp_model.LinearExprT


class Phase(StrEnum):
    """When a module's constraints join the model."""

    ADMISSION = "admission"
    """Everything that decides *what* is admitted: built first, solved by the priority stages."""
    QUALITY = "quality"
    """Placement preferences: added once the admitted set is fixed, on a much smaller problem."""


class Stage(StrEnum):
    """A lexicographic stage; its value is the name the plan reports (priority stages add the level)."""

    PRIORITY = "priority"
    """GPUs admitted at one priority level, with the ageing bonus (maximised)."""
    MIG_RECONFIGURATION = "mig-reconfiguration"
    """MIG GPUs given a new layout (minimised): a change restarts the node's device plugin and DCGM."""
    MIG_FRAGMENTATION = "mig-fragmentation"
    """Idle MIG GPUs given instances, then free memory slices the queue's usual profiles could not use."""
    TOPOLOGY = "topology"
    """Domains a gang spans, and pods that span NVLink islands although one island could hold them."""
    PACKING = "packing"
    """Free GPUs left in shapes the queue cannot use, and whole nodes opened."""
    NVLINK_FIT = "nvlink-fit"
    """Pods too big for every island of their node, sent to a box whose island holds them.

    After packing, so this costs no packing. Ranked with the avoidable splits
    it would pull multi-GPU pods onto NVSwitch boards at any price, splitting
    gangs over racks and stranding those boards' GPUs for the 8-GPU pods that
    need them.
    """
    STABILITY = "stability"
    """Pods moved against the previous plan: last, so keeping a plan never costs a better one."""

    @property
    def phase(self) -> Phase:
        return Phase.ADMISSION if self is Stage.PRIORITY else Phase.QUALITY


ORDER: tuple[Stage, ...] = (
    Stage.PRIORITY,
    Stage.MIG_RECONFIGURATION,
    Stage.MIG_FRAGMENTATION,
    Stage.TOPOLOGY,
    Stage.PACKING,
    Stage.NVLINK_FIT,
    Stage.STABILITY,
)
"""Stages in the order they are optimised; priority stages run highest level first."""


def priority_stage(priority: int) -> str:
    """The reported name of the admission stage of one priority level."""
    return f"{Stage.PRIORITY}:{priority}"


@dataclass(frozen=True)
class ObjectiveTerm:
    """One part of a stage objective; terms of the same stage (and level) are summed."""

    stage: Stage
    expr: LinearExpr
    maximize: bool = False
    scale: float = 1.0
    """Divide the stage value by this to report it in natural units (GPUs)."""
    priority: int = 0
    """The priority level of a :attr:`Stage.PRIORITY` term."""

    @property
    def name(self) -> str:
        """Stage name as reported in the plan, e.g. ``priority:1000`` or ``topology``."""
        return priority_stage(self.priority) if self.stage is Stage.PRIORITY else str(self.stage)

    @property
    def order(self) -> tuple[int, int]:
        """Lexicographic position: lower positions are optimised first."""
        return ORDER.index(self.stage), -self.priority


def pod_value(req: PodRequest, age_hours: float, ageing: AgeingSettings) -> int:
    """Objective value of one admitted pod (milli-GPUs, ageing included)."""
    base = (req.gpu_milli_total if req.is_share else req.gpus * FULL_GPU_MILLI) + req.mig_milli
    if base == 0:
        return 1
    bonus = min(ageing.cap, ageing.per_hour * age_hours)
    return round(base * (1.0 + bonus))
