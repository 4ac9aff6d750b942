"""Lexicographic optimisation by successive CP-SAT solves.

Stages run highest first (priority levels, then topology, packing,
stability). After a stage, its objective is pinned (``>= best`` when
maximising; ``<= best`` plus the configured tolerance when minimising) and the
next stage starts from the previous solution as a hint, so it can only
improve what the earlier stages left open. Admission stages share most of
the time budget; time a stage does not use passes to the next one.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from itertools import groupby

from ortools.sat.python import cp_model, cp_model_helper

from optsched.solver.context import ObjectiveTerm, SolverContext
from optsched.solver.modules.admission import ADMISSION_RANK

MIN_STAGE_SECONDS = 0.05
GOOD = (cp_model.OPTIMAL, cp_model.FEASIBLE)


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

    @property
    def optimal(self) -> bool:
        return bool(self.results) and all(r.status == "OPTIMAL" for r in self.results)


@dataclass
class _Stage:
    name: str
    rank: tuple[int, int]
    expr: cp_model.LinearExprT
    maximize: bool
    scale: float


def _stages(terms: list[ObjectiveTerm]) -> list[_Stage]:
    out = []
    ordered = sorted(terms, key=lambda t: (t.rank, t.stage))
    for (rank, name), group in groupby(ordered, key=lambda t: (t.rank, t.stage)):
        items = list(group)
        if len({t.maximize for t in items}) != 1:
            raise ValueError(f"stage {name} mixes maximised and minimised terms")
        expr = sum((t.expr for t in items), start=0) if len(items) > 1 else items[0].expr
        out.append(_Stage(name, rank, expr, items[0].maximize, items[0].scale))
    return out


def solve_stages(
    ctx: SolverContext, terms: list[ObjectiveTerm], deadline: float, solution: list[int] | None = None
) -> StagesOutcome:
    """Run every stage before ``deadline`` (a reading of ``ctx.clock``).

    ``solution`` is the assignment an earlier call ended with (kept when no
    stage here finds one); without it, a model with no stage still gets one
    feasibility solve.
    """
    settings = ctx.settings
    model = ctx.model
    stages = _stages(terms)
    outcome = StagesOutcome(solution=solution)
    if not stages:
        if solution is not None:
            return outcome
        stages = [_Stage("feasible", (ADMISSION_RANK, 0), 0, True, 1.0)]
    clock = ctx.clock
    budget = max(deadline - clock.now(), MIN_STAGE_SECONDS * len(stages))
    # The first stage decides the most and has no full hint yet: it gets the largest share.
    weights = [4.0 if i == 0 else 2.0 if s.rank[0] == ADMISSION_RANK else 1.0 for i, s in enumerate(stages)]
    shares = [budget * w / sum(weights) for w in weights]
    carry = 0.0
    for index, stage in enumerate(stages):
        known = ctx.known_optimum.get(stage.name)
        if known is not None and stage.maximize:
            # Every workload of this level in the window fits at once (the greedy plan admits them
            # all): that is the most the level can reach, so the bound is exact ...
            model.add(stage.expr <= known)
        if known is not None and outcome.solution is None and stage.maximize:
            # ... and a leading level needs no solve at all: pin it. (When every level is known,
            # the caller continues from the greedy solution itself.)
            model.add(stage.expr >= known)
            outcome.results.append(
                StageResult(stage.name, "OPTIMAL", known / stage.scale, known / stage.scale, 0.0, True)
            )
            carry += shares[index]
            continue
        left = deadline - clock.now()
        later = sum(shares[index + 1 :])
        allowed = max(MIN_STAGE_SECONDS, min(shares[index] + carry, left - later * 0.25))
        started = time.perf_counter()
        counted_from = clock.now()
        model.clear_objective()  # type: ignore[no-untyped-call]
        if stage.maximize:
            model.maximize(stage.expr)
        else:
            model.minimize(stage.expr)
        solver = cp_model.CpSolver()
        params = solver.parameters
        clock.limit(solver, allowed)
        params.num_workers = settings.workers or (os.cpu_count() or 1)
        params.random_seed = settings.random_seed
        params.log_search_progress = settings.log_search
        # Presolve is repeated every stage; one light pass keeps it from eating a short time limit.
        params.max_presolve_iterations = 1
        params.cp_model_probing_level = 0
        params.symmetry_level = 0
        if stage.rank[0] != ADMISSION_RANK:
            # Quality stages start from a complete feasible hint with the admitted set fixed; on a
            # large model presolve alone can take their whole share, so they search directly.
            params.cp_model_presolve = False
        status = solver.solve(model)
        clock.charge(solver)
        seconds = time.perf_counter() - started
        carry = max(0.0, shares[index] + carry - (clock.now() - counted_from))
        if status not in GOOD:
            name = solver.status_name(status)
            if outcome.solution is None:
                outcome.failure = f"stage {stage.name}: {name} after {seconds:.2f}s"
                return outcome
            ctx.notes.append(
                f"stage {stage.name} found no solution in {seconds:.2f}s ({name}); kept the previous stage's"
            )
            break
        value = solver.objective_value
        bound = solver.best_objective_bound
        outcome.solution = list(solver.response_proto.solution)
        outcome.results.append(
            StageResult(
                stage.name,
                solver.status_name(status),
                value / stage.scale + 0.0,
                bound / stage.scale + 0.0,
                seconds,
                stage.rank[0] == ADMISSION_RANK,
            )
        )
        best = round(value)
        if isinstance(stage.expr, int):
            pass
        elif stage.maximize:
            model.add(stage.expr >= best)
        else:
            slack = 0 if stage.rank[0] == ADMISSION_RANK else math.floor(settings.stage_tolerance * abs(best))
            model.add(stage.expr <= best + slack)
        set_hint(model, outcome.solution)
    return outcome


def stage_values(terms: list[ObjectiveTerm], values: dict[int, int]) -> tuple[int, ...]:
    """The stages' objectives under a complete assignment, each as a cost (lower is better)."""
    out = []
    for stage in _stages(terms):
        if not isinstance(stage.expr, cp_model.LinearExpr):
            continue
        flat = cp_model_helper.FlatIntExpr(stage.expr)
        pairs = zip(flat.vars, flat.coeffs, strict=True)
        value = flat.offset + sum(c * values.get(v.index, 0) for v, c in pairs)
        out.append(-value if stage.maximize else value)
    return tuple(out)


def set_hint(model: cp_model.CpModel, values: list[int]) -> None:
    """Replace the model's hint with a full assignment (fast: straight into the proto)."""
    model.clear_hints()  # type: ignore[no-untyped-call]
    hint = model.proto.solution_hint
    hint.vars.extend(range(len(values)))
    hint.values.extend(values)
