"""The optimizer: a joint CP-SAT placement of the queue head, lexicographic, with a greedy fallback."""

from __future__ import annotations

from optsched.solver.optimizer import solve
from optsched.solver.result import SolveResult

__all__ = ["SolveResult", "solve"]
