"""What a solve decides, as a value: the placement and how good it is, not yet a plan to read.

The planner (:mod:`optsched.planning`) turns it into the user-facing
:class:`~optsched.model.plan.Plan`, with reasons and a summary, exactly as it
does for the greedy baselines' placements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optsched.model.placement import Placement
from optsched.model.plan import PlanStatus


@dataclass(frozen=True)
class SolveResult:
    placement: Placement
    status: PlanStatus
    seconds: float = 0.0
    """Wall time of the whole solve: greedy hint, model building, search and GPU assignment."""
    objective: dict[str, float] = field(default_factory=dict)
    """Per lexicographic stage, highest first, plus ``gpus`` admitted."""
    bound: float | None = None
    gap: float | None = None
    warnings: tuple[str, ...] = ()
    log: tuple[str, ...] = ()
    """One line per phase of the solve, with its time (the plan's solver log)."""
    beyond_window: tuple[str, ...] = ()
    """Workloads past the planning window, deferred without being planned (keys)."""
