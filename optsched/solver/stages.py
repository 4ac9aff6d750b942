"""Lexicographic optimisation by successive CP-SAT solves.

Stages run in the order :mod:`optsched.solver.objective` gives them (priority
levels, then topology, packing, nvlink-fit, stability). After a stage, its
objective is pinned (``>= best`` when maximising; ``<= best`` plus the
configured tolerance when minimising) and the next stage starts from the
previous solution as a hint, so it can only improve what the earlier stages
left open. Admission stages share most of the time budget; time a stage does
not use passes to the next one.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import groupby

from ortools.sat.python import cp_model

from optsched.settings import Settings
from optsched.solver import lns
from optsched.solver.clock import SearchClock
from optsched.solver.expressions import domain_ends, evaluate, upper_bound
from optsched.solver.hints import write_hint
from optsched.solver.objective import ObjectiveTerm, Stage

MIN_STAGE_SECONDS = 0.05
LNS_SHARE = 0.5
"""Share of a stage's budget for neighbourhood solves once the whole model has had its turn."""
MAX_EXACT = 2**53
"""Objectives stay below this so CP-SAT's floating-point objective value is exact."""
GOOD = (cp_model.OPTIMAL, cp_model.FEASIBLE)
FEASIBLE_STAGE = "feasible"
"""The one stage of a model without objective terms: find any solution."""


@dataclass
class StageResult:
    name: str
    status: str
    value: float
    """In reported units (objective / scale)."""
    bound: float
    seconds: float
    admission: bool


@dataclass
class StagesOutcome:
    solution: list[int] | None
    results: list[StageResult] = field(default_factory=list)
    failure: str = ""
    notes: list[str] = field(default_factory=list)
    """Stages that found no solution although an earlier one had (the plan's warnings)."""
    neighbourhoods: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Stage -> neighbourhood solves made, and how many of them improved it."""

    @property
    def optimal(self) -> bool:
        return bool(self.results) and all(r.status == "OPTIMAL" for r in self.results)


@dataclass(frozen=True)
class _Stage:
    name: str
    expr: cp_model.LinearExprT
    maximize: bool
    scale: float
    admission: bool


def _stages(terms: list[ObjectiveTerm]) -> list[_Stage]:
    out = []
    ordered = sorted(terms, key=lambda t: (t.order, t.name))
    for (_, name), group in groupby(ordered, key=lambda t: (t.order, t.name)):
        items = list(group)
        if len({t.maximize for t in items}) != 1:
            raise ValueError(f"stage {name} mixes maximised and minimised terms")
        expr = sum((t.expr for t in items), start=0) if len(items) > 1 else items[0].expr
        first = items[0]
        out.append(_Stage(name, expr, first.maximize, first.scale, first.stage is Stage.PRIORITY))
    return out


def _shares(stages: list[_Stage], budget: float) -> list[float]:
    """The first stage decides the most and has no full hint yet: it gets the largest share."""
    weights = [4.0 if i == 0 else 2.0 if s.admission else 1.0 for i, s in enumerate(stages)]
    return [budget * w / sum(weights) for w in weights]


def solve_stages(
    model: cp_model.CpModel,
    settings: Settings,
    clock: SearchClock,
    terms: list[ObjectiveTerm],
    deadline: float,
    *,
    solution: list[int] | None = None,
    known: Mapping[str, int] | None = None,
    fallback: Mapping[int, int] | None = None,
    layout: lns.Racks | None = None,
) -> StagesOutcome:
    """Run every stage before ``deadline`` (a reading of ``clock``).

    ``solution`` is the assignment an earlier call ended with (kept when no
    stage here finds one); without it, a model with no stage still gets one
    feasibility solve. ``known`` holds stage optima known without a solve.
    ``fallback`` is a complete feasible assignment (the greedy placement's):
    a stage that finds no solution before any other did continues from it
    instead of ending the pass. With ``layout``, half of each stage's share
    goes to neighbourhood solves a few racks at a time after the whole-model
    solve (:mod:`optsched.solver.lns`).
    """
    stages = _stages(terms)
    outcome = StagesOutcome(solution=solution)
    if not stages:
        if solution is not None:
            return outcome
        stages = [_Stage(FEASIBLE_STAGE, 0, True, 1.0, True)]
    runner = _Runner(model, settings, clock, outcome, known or {}, fallback, layout)
    runner.run(stages, deadline)
    return outcome


class _Runner:
    """One pass over the stages; keeps the time a stage did not use for the next."""

    def __init__(
        self,
        model: cp_model.CpModel,
        settings: Settings,
        clock: SearchClock,
        outcome: StagesOutcome,
        known: Mapping[str, int],
        fallback: Mapping[int, int] | None = None,
        layout: lns.Racks | None = None,
    ) -> None:
        self.fallback = fallback
        self.layout = layout
        self.model = model
        self.settings = settings
        self.clock = clock
        self.outcome = outcome
        self.known = known
        self.carry = 0.0
        self.lower: list[cp_model.LinearExprT] = []
        """The later priority stages' expressions while a priority stage is solved."""
        self._ends: list[tuple[int, int]] | None = None
        """Every variable's domain ends, read once: stages pin values by constraints, not domains."""

    def run(self, stages: list[_Stage], deadline: float) -> None:
        budget = max(deadline - self.clock.now(), MIN_STAGE_SECONDS * len(stages))
        shares = _shares(stages, budget)
        for index, stage in enumerate(stages):
            if self._known(stage):
                self.carry += shares[index]
                continue
            self.lower = [
                s.expr for s in stages[index + 1 :] if s.admission and s.maximize and stage.admission
            ]
            left = deadline - self.clock.now()
            later = sum(shares[index + 1 :])
            allowed = max(MIN_STAGE_SECONDS, min(shares[index] + self.carry, left - later * 0.25))
            if not self._solve(stage, allowed, shares[index]):
                return

    def _known(self, stage: _Stage) -> bool:
        """Pin a stage whose optimum is known; True when that needs no solve."""
        known = self.known.get(stage.name)
        if known is None or not stage.maximize:
            return False
        # Every workload of this level in the window fits at once (the greedy plan admits them
        # all): that is the most the level can reach, so the bound is exact ...
        self.model.add(stage.expr <= known)
        if self.outcome.solution is not None:
            return False
        # ... and a leading level needs no solve at all: pin it. (When every level is known,
        # the caller continues from the greedy solution itself.)
        self.model.add(stage.expr >= known)
        value = known / stage.scale
        self.outcome.results.append(StageResult(stage.name, "OPTIMAL", value, value, 0.0, True))
        return True

    def _solve(self, stage: _Stage, allowed: float, share: float) -> bool:
        """Solve one stage and pin its objective; False when the pass must stop."""
        model, outcome = self.model, self.outcome
        started = time.perf_counter()
        counted_from = self.clock.now()
        model.clear_objective()  # type: ignore[no-untyped-call]
        objective, weight = self._objective(stage)
        whole = allowed * (1.0 - LNS_SHARE) if self.layout is not None else allowed
        solver = self._solver(stage, whole)
        status = solver.solve(model)
        self.clock.charge(solver)
        name = solver.status_name(status)
        bound = solver.best_objective_bound
        if status in GOOD:
            solution = list(solver.response_proto.solution)
        elif status == cp_model.UNKNOWN and (outcome.solution is not None or self.fallback is not None):
            # Out of time before a first solution: the stage goes on from the solution it started with.
            solution = self._incumbent(stage, name, time.perf_counter() - started)
            name, bound = "FEASIBLE", math.inf if stage.maximize else -math.inf
        else:
            self.carry = max(0.0, share + self.carry - (self.clock.now() - counted_from))
            return self._stop(stage, name, time.perf_counter() - started)
        if self.layout is not None and status != cp_model.OPTIMAL:
            solution = self._around(stage, objective, solution, counted_from + allowed)
        self.carry = max(0.0, share + self.carry - (self.clock.now() - counted_from))
        self._record(stage, name, solution, bound, weight, time.perf_counter() - started)
        return True

    def _stop(self, stage: _Stage, name: str, seconds: float) -> bool:
        """A stage proved the model infeasible or invalid, or ran out of time with nothing to go on."""
        if self.outcome.solution is None:
            self.outcome.failure = f"stage {stage.name}: {name} after {seconds:.2f}s"
        else:
            self.outcome.notes.append(
                f"stage {stage.name} found no solution in {seconds:.2f}s (solver status {name}); "
                "the plan keeps the previous stage's"
            )
        return False

    def _incumbent(self, stage: _Stage, status: str, seconds: float) -> list[int]:
        """The solution a stage that found none goes on from: the last stage's, else the fallback's."""
        if self.outcome.solution is not None:
            self.outcome.notes.append(
                f"stage {stage.name} found no solution in {seconds:.2f}s (solver status {status}); "
                "it continues from the previous stage's"
            )
            return list(self.outcome.solution)
        assert self.fallback is not None
        self.outcome.notes.append(
            f"stage {stage.name} found no solution in {seconds:.2f}s (solver status {status}); "
            "the search continues from the greedy placement"
        )
        size = len(self.model.proto.variables)
        return [self.fallback.get(i, 0) for i in range(size)]

    def _around(
        self, stage: _Stage, objective: cp_model.LinearExprT, solution: list[int], until: float
    ) -> list[int]:
        """The rest of the stage's share as neighbourhood solves (:mod:`optsched.solver.lns`)."""
        assert self.layout is not None
        better, tried, improved = lns.improve(
            self.model, objective, stage.maximize, solution, self.layout, self.settings, self.clock, until
        )
        self.outcome.neighbourhoods[stage.name] = (tried, improved)
        return better

    def _record(
        self, stage: _Stage, status: str, solution: list[int], bound: float, weight: int, seconds: float
    ) -> None:
        """Keep a stage's solution, report it, pin its value and hint it to the next stage."""
        self.outcome.solution = solution
        value = float(evaluate(stage.expr, solution))
        if weight > 1 and math.isfinite(bound):
            # The stage's own term is an integer at most the combined bound over its weight.
            bound = float(math.floor(bound / weight + 1e-9))
        self.outcome.results.append(
            StageResult(
                stage.name,
                status,
                value / stage.scale + 0.0,
                bound / stage.scale + 0.0,
                seconds,
                stage.admission,
            )
        )
        self._pin(stage, round(value))
        write_hint(self.model, dict(enumerate(solution)))

    def _objective(self, stage: _Stage) -> tuple[cp_model.LinearExprT, int]:
        """Set the model's objective for ``stage``; returns it and the weight of the stage's own term.

        A priority stage that leaves lower levels out of its objective is free to
        drop their work for nothing, and the lower stages must then win it back
        in their own, smaller shares of the budget. So a priority stage also
        counts, below its own value, the work of the levels after it, in their
        own order (each weighted past the largest total of those below it, as
        far as the numbers stay exact), which keeps the order exact: a stage may
        not trade the next level's work for the one after.
        """
        objective: cp_model.LinearExprT = stage.expr
        weight = 1
        if not self.lower or not stage.maximize:
            self._set(stage, objective)
            return objective, weight
        if self._ends is None:
            self._ends = domain_ends(self.model)
        ends = self._ends
        top = upper_bound(stage.expr, ends)
        lower, ceiling = _lexicographic(self.lower, MAX_EXACT // max(2, top + 1), ends)
        if lower is not None:
            weight = ceiling + 1
            objective = cp_model.LinearExpr.weighted_sum([stage.expr, lower], [weight, 1])
        self._set(stage, objective)
        return objective, weight

    def _set(self, stage: _Stage, objective: cp_model.LinearExprT) -> None:
        if stage.maximize:
            self.model.maximize(objective)
        else:
            self.model.minimize(objective)

    def _solver(self, stage: _Stage, allowed: float) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        params = solver.parameters
        self.clock.limit(solver, allowed)
        params.num_workers = self.settings.workers or (os.cpu_count() or 1)
        params.random_seed = self.settings.random_seed
        params.log_search_progress = self.settings.log_search
        # Presolve is repeated every stage; one light pass keeps it from eating a short time limit.
        params.max_presolve_iterations = 1
        params.cp_model_probing_level = 0
        params.symmetry_level = 0
        if not stage.admission:
            # Quality stages start from a complete feasible hint with the admitted set fixed; on a
            # large model presolve alone can take their whole share, so they search directly.
            params.cp_model_presolve = False
        return solver

    def _pin(self, stage: _Stage, best: int) -> None:
        """The next stages may not make this one worse (quality stages within the tolerance)."""
        if isinstance(stage.expr, int):
            return
        if stage.maximize:
            self.model.add(stage.expr >= best)
        else:
            slack = 0 if stage.admission else math.floor(self.settings.stage_tolerance * abs(best))
            self.model.add(stage.expr <= best + slack)


def stage_values(terms: list[ObjectiveTerm], values: dict[int, int]) -> tuple[int, ...]:
    """The stages' objectives under a complete assignment, each as a cost (lower is better)."""
    out = []
    for stage in _stages(terms):
        if not isinstance(stage.expr, cp_model.LinearExpr):
            continue
        value = evaluate(stage.expr, values)
        out.append(-value if stage.maximize else value)
    return tuple(out)


def _lexicographic(
    exprs: list[cp_model.LinearExprT], limit: int, ends: list[tuple[int, int]] | None = None
) -> tuple[cp_model.LinearExprT | None, int]:
    """``exprs`` as one sum below ``limit`` that ranks them in order, and its largest value.

    Exact where the numbers allow: each expression weighted past the largest
    value of those after it. Where that would pass ``limit``, every expression
    still counts, nearer ones more (weights n, n-1, ..., 1): a stage then
    never drops the lower levels' work for nothing, and each lower level
    restores its own order in its stage.
    """
    if not exprs:
        return None, 0
    tops = [upper_bound(expr, ends) for expr in exprs]
    weights = [1] * len(exprs)
    for i in range(len(exprs) - 2, -1, -1):
        weights[i] = sum(w * t for w, t in zip(weights[i + 1 :], tops[i + 1 :], strict=True)) + 1
    if sum(w * t for w, t in zip(weights, tops, strict=True)) >= limit:
        weights = list(range(len(exprs), 0, -1))
    ceiling = sum(w * t for w, t in zip(weights, tops, strict=True))
    if ceiling >= limit:
        return None, 0
    return cp_model.LinearExpr.weighted_sum(exprs, weights), ceiling
