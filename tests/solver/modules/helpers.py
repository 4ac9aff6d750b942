"""One module at a time: build a tiny problem, apply only the modules under test, ask CP-SAT.

A test builds the problem and its variables (:func:`context`), applies the
module under test and what it strictly needs (:func:`apply`), pins a placement
with :meth:`~optsched.solver.variables.Variables.fix`, and then asserts the
model feasible or infeasible, or reads the cheapest value of the module's
objective terms under that placement (:func:`cheapest`). No greedy plan, no
stages and no GPU assignment run, so a failure points at the module.
"""

from __future__ import annotations

from collections.abc import Mapping

from ortools.sat.python import cp_model

from optsched.model.placement import Placement
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings
from optsched.solver.context import ModelContext, Module, new_context
from optsched.solver.objective import ObjectiveTerm
from optsched.solver.problem import build_problem
from tests.solver.helpers import FAST


def context(
    snap: Snapshot, settings: Settings = FAST, previous: Plan | None = None, greedy: Placement | None = None
) -> ModelContext:
    """The problem's variables in an empty model (no module applied yet)."""
    return new_context(build_problem(snap, settings, greedy or Placement(), previous))


def apply(ctx: ModelContext, *modules: Module, weight: int = 1) -> list[ObjectiveTerm]:
    terms: list[ObjectiveTerm] = []
    for module in modules:
        terms += module.apply(ctx, weight)
    return terms


def fix(
    ctx: ModelContext,
    admit: Mapping[str, bool] | None = None,
    pods: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
) -> None:
    """:meth:`Variables.fix` with workload names for keys (the builders' default namespace)."""
    ctx.vars.fix(
        ctx.model,
        admit={f"default/{name}": value for name, value in (admit or {}).items()},
        pods={(f"default/{name}", ps): counts for (name, ps), counts in (pods or {}).items()},
    )


def admit_only(ctx: ModelContext, *names: str) -> None:
    """Fix the admitted set as the optimizer does before the quality modules."""
    keys = {f"default/{name}" for name in names}
    admitted = {w.index for w in ctx.vars.workloads if w.workload.key in keys}
    for entry in ctx.vars.workloads:
        ctx.model.add(entry.admit == int(entry.index in admitted))
    ctx.vars.keep_admitted(admitted)


def _solve(model: cp_model.CpModel) -> tuple[cp_model.CpSolverStatus, cp_model.CpSolver]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10.0
    return solver.solve(model), solver


def feasible(ctx: ModelContext) -> bool:
    status, _ = _solve(ctx.model)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE), status
    return status != cp_model.INFEASIBLE


def assert_feasible(ctx: ModelContext) -> None:
    assert feasible(ctx), "the model has no solution"


def assert_infeasible(ctx: ModelContext) -> None:
    assert not feasible(ctx), "the model has a solution"


def cheapest(ctx: ModelContext, terms: list[ObjectiveTerm]) -> float:
    """The least the terms can sum to under the pinned placement (auxiliaries at their best)."""
    assert terms, "the module returned no objective term"
    ctx.model.minimize(sum((t.expr for t in terms), start=0))
    status, solver = _solve(ctx.model)
    assert status == cp_model.OPTIMAL, solver.status_name(status)
    return solver.objective_value
