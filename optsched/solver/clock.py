"""What the search budget is counted in: wall-clock seconds or CP-SAT's deterministic time.

Wall-clock seconds are what an operator sets for a control loop. They make a
plan depend on the machine's load: the same snapshot can end with another
solution when a stage is cut a little earlier. CP-SAT also counts its work in
"deterministic time", a measure of work done that does not depend on load;
with one search worker and the same seed, a budget counted in it gives the
same plan on every run, which benchmarks need to compare policies fairly.
A deterministic budget keeps a wall-clock safety cap so a slow machine cannot
run away with it.
"""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

WALL_CAP_FACTOR = 30.0
"""A solve under a deterministic budget may take this many times the budget in wall-clock seconds."""


class SearchClock:
    """Hands out stage budgets and counts what the solves used, in one of the two units."""

    def __init__(self, deterministic: bool = False) -> None:
        self.deterministic = deterministic
        self._spent = 0.0

    def now(self) -> float:
        """A reading to subtract from a later one: seconds, or deterministic time spent so far."""
        return self._spent if self.deterministic else time.perf_counter()

    def limit(self, solver: cp_model.CpSolver, allowed: float, wall_floor: float = 0.0) -> None:
        """Give one solve ``allowed`` units of budget.

        ``wall_floor``: under a deterministic budget, the safety cap is never below this many
        seconds (a short solve whose fixed cost is not counted in deterministic time could
        otherwise meet the cap on a loaded machine, and the plan would depend on the load).
        """
        if self.deterministic:
            solver.parameters.max_deterministic_time = allowed
            solver.parameters.max_time_in_seconds = max(wall_floor, WALL_CAP_FACTOR * allowed)
        else:
            solver.parameters.max_time_in_seconds = allowed

    def charge(self, solver: cp_model.CpSolver, minimum: float = 0.0) -> None:
        """Count a finished solve against the budget (wall-clock time counts itself).

        ``minimum`` is the least a solve costs in deterministic time: CP-SAT does
        not count loading and presolving a large model, so many small solves of
        one would otherwise take far more wall time than their budget says.
        """
        if self.deterministic:
            self._spent += max(minimum, solver.response_proto.deterministic_time)
