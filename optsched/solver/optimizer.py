"""``solve``: place the pending queue with CP-SAT, never worse than the greedy BestFit placement.

One solve is a fixed sequence of phases (:class:`Optimizer`, one method each):

1. The greedy BestFit placement: the baseline, the first (complete) solution
   hint, and the fallback.
2. The problem (:mod:`optsched.solver.problem`): the planning window and
   every PodSet's candidate nodes.
3. The admission model: the decision variables and the admission modules
   (gangs, capacity, required NVLink and topology, products, flavors, quota,
   one objective stage per priority level), hinted with the greedy placement.
4. Admission stages. A leading level the greedy plan admits whole has a known
   optimum and is pinned without a solve.
5. The admitted set is fixed.
6. The quality model: island counts, the NVLink and topology preferences,
   packing and stability, started from the better of the admission solution
   and the greedy placement.
7. Quality stages.
8. Counts become pods with GPU indices (:mod:`optsched.solver.assign`).
9. The result is compared with the greedy plan priority level by priority
   level: if it is lexicographically worse (the time limit was too short),
   the greedy placement is returned with the solver's status and bound and a
   warning. No solver solution at all gives the greedy plan as ``FALLBACK``.
10. The result: status, stage values, bound, gap, warnings and the log.

``Settings.time_limit_s`` is the CP-SAT search budget over all stages; the
greedy hint, model building and plan assembly are timed in the solver log.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from optsched.capacity.baseline import Baseline
from optsched.model.placement import Placement
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot
from optsched.policies.choosers import BestFit
from optsched.policies.greedy import greedy_placement
from optsched.settings import Settings
from optsched.solver import lns
from optsched.solver.assign import build_placement
from optsched.solver.clock import SearchClock
from optsched.solver.context import ModelContext, Module, new_context
from optsched.solver.modules import applied, default_modules, quality_wanted
from optsched.solver.objective import ObjectiveTerm, Phase
from optsched.solver.problem import Problem, build_problem
from optsched.solver.report import admitted_vector, capacity_bounds, gpus_admitted, lex_less, report
from optsched.solver.result import SolveResult
from optsched.solver.stages import StagesOutcome, solve_stages
from optsched.solver.warmstart import hint_greedy, known_optima, quality_start


def solve(
    snapshot: Snapshot,
    settings: Settings | None = None,
    previous: Plan | None = None,
    *,
    modules: Iterable[Module] | None = None,
    baseline: Baseline | None = None,
) -> SolveResult:
    """Plan every pending workload of ``snapshot``; see the module docstring.

    ``baseline`` is the snapshot's capacity and quota when the caller has them
    already (the planner reads them once per plan).
    """
    return Optimizer(snapshot, settings or Settings(), previous, modules, baseline).solve()


@dataclass(frozen=True)
class AdmissionModel:
    """Phase 3's result: the model with the admission modules, hinted with the greedy placement."""

    ctx: ModelContext
    terms: list[ObjectiveTerm]
    """The priority stages' terms."""
    deferred: list[ObjectiveTerm]
    """Quality-stage terms an admission module returned; they join the quality stages."""
    greedy_hint: dict[int, int]
    known: dict[str, int]
    """Stage optima known without a solve."""


@dataclass(frozen=True)
class Admitted:
    """Phase 4's result: the admission stages and the solution they ended with."""

    outcome: StagesOutcome
    searched: float
    """Search budget the admission stages used."""
    provisional: bool
    """No stage needed a solve: the solution is the greedy hint, not yet confirmed by a solve."""


class Optimizer:
    """One solve of one snapshot, phase by phase (see the module docstring)."""

    def __init__(
        self,
        snapshot: Snapshot,
        settings: Settings,
        previous: Plan | None,
        modules: Iterable[Module] | None,
        baseline: Baseline | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.baseline = Baseline.reuse(snapshot, baseline)
        self.settings = settings
        self.previous = previous
        self.modules = list(modules) if modules is not None else default_modules()
        self.clock = SearchClock(settings.deterministic_time)
        """The search budget's unit: wall-clock seconds unless the settings ask for deterministic time."""
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        """Wall time per phase, for the log."""
        self.notes: list[str] = []
        """Warnings collected on the way."""

    def solve(self) -> SolveResult:
        if not self.snapshot.workloads:
            return SolveResult(Placement(), PlanStatus.EMPTY)
        greedy = self.greedy_hint()
        if self.settings.force_fallback:
            return self.fallback(greedy, "the solver is switched off in the settings")
        problem = self.problem(greedy)
        model = self.admission_model(problem, greedy)
        admitted = self.admission_stages(model)
        if admitted.outcome.solution is None:
            return self.fallback(greedy, f"no solver solution ({admitted.outcome.failure})")
        self.fix_admitted(model.ctx, admitted.outcome.solution)
        terms, start = self.quality_model(model, admitted.outcome.solution, greedy)
        outcome, solved = self.quality_stages(model.ctx, admitted, terms, start)
        placement = self.assignment(model.ctx, outcome, greedy, admitted.provisional and not solved)
        greedy_value = self.compare_with_greedy(placement, greedy)
        if greedy_value is not None:
            placement = greedy
        return self.result(model.ctx, outcome, placement, greedy_value)

    # 1 -------------------------------------------------------------------------------------------

    def greedy_hint(self) -> Placement:
        greedy = greedy_placement(self.snapshot, BestFit(), baseline=self.baseline)
        self.seconds["greedy"] = time.perf_counter() - self.started
        return greedy

    # 2 -------------------------------------------------------------------------------------------

    def problem(self, greedy: Placement) -> Problem:
        """The window and the candidates; the greedy plan's nodes stay candidates."""
        return build_problem(self.snapshot, self.settings, greedy, self.previous, baseline=self.baseline)

    # 3 -------------------------------------------------------------------------------------------

    def admission_model(self, problem: Problem, greedy: Placement) -> AdmissionModel:
        ctx = new_context(problem)
        terms: list[ObjectiveTerm] = []
        for module, weight in applied(self.modules, self.settings, Phase.ADMISSION):
            terms.extend(module.apply(ctx, weight))
        hint = hint_greedy(ctx, greedy)
        known = known_optima(ctx.vars, greedy)
        self.seconds["admission model"] = time.perf_counter() - self.started - self.seconds["greedy"]
        now = [t for t in terms if t.stage.phase is Phase.ADMISSION]
        later = [t for t in terms if t.stage.phase is not Phase.ADMISSION]
        return AdmissionModel(ctx, now, later, hint, known)

    # 4 -------------------------------------------------------------------------------------------

    def admission_stages(self, model: AdmissionModel) -> Admitted:
        settings = self.settings
        wanted = quality_wanted(settings, self.previous, mig_layouts=bool(model.ctx.vars.mig.gpus))
        share = settings.admission_share if wanted else 1.0
        now = self.clock.now()
        ctx = model.ctx
        outcome = solve_stages(
            ctx.model,
            settings,
            self.clock,
            model.terms,
            now + settings.time_limit_s * share,
            known=model.known,
            fallback=model.greedy_hint,
            layout=self.layout(ctx),
        )
        searched = self.clock.now() - now
        provisional = outcome.solution is None and not outcome.failure and bool(outcome.results)
        if provisional:
            # The greedy plan admits the whole window, which no plan can beat: start from it.
            outcome.solution = [model.greedy_hint.get(i, 0) for i in range(len(ctx.model.proto.variables))]
        return Admitted(outcome, searched, provisional)

    def layout(self, ctx: ModelContext) -> lns.Racks | None:
        """The rack map for neighbourhood solves, where the settings ask for them."""
        return lns.racks(ctx.vars) if self.settings.neighbourhood_search else None

    # 5 -------------------------------------------------------------------------------------------

    def fix_admitted(self, ctx: ModelContext, solution: list[int]) -> None:
        """Fix what is admitted; the quality stages then work on a much smaller problem."""
        admitted = {e.index for e in ctx.vars.workloads if solution[e.admit.index]}
        for entry in ctx.vars.workloads:
            ctx.model.add(entry.admit == int(entry.index in admitted))
        ctx.vars.keep_admitted(admitted)

    # 6 -------------------------------------------------------------------------------------------

    def quality_model(
        self, model: AdmissionModel, solution: list[int], greedy: Placement
    ) -> tuple[list[ObjectiveTerm], list[int]]:
        """The quality modules and their stage terms, and the solution they start from."""
        started = time.perf_counter()
        ctx = model.ctx
        terms = list(model.deferred)
        for module, weight in applied(self.modules, self.settings, Phase.QUALITY):
            terms.extend(module.apply(ctx, weight))
        start = quality_start(ctx, terms, solution, greedy, model.greedy_hint)
        self.seconds["quality model"] = time.perf_counter() - started
        return terms, start

    # 7 -------------------------------------------------------------------------------------------

    def quality_stages(
        self, ctx: ModelContext, admitted: Admitted, terms: list[ObjectiveTerm], start: list[int]
    ) -> tuple[StagesOutcome, bool]:
        """The quality stages after the admission ones; True when a quality stage was solved."""
        # The search budget excludes model building: the quality stages get what admission left.
        deadline = self.clock.now() + max(0.0, self.settings.time_limit_s - admitted.searched)
        outcome = solve_stages(
            ctx.model, self.settings, self.clock, terms, deadline, solution=start, layout=self.layout(ctx)
        )
        solved = len(outcome.results) > 0
        self.notes += admitted.outcome.notes + outcome.notes
        outcome.results[:0] = admitted.outcome.results
        outcome.neighbourhoods = {**admitted.outcome.neighbourhoods, **outcome.neighbourhoods}
        return outcome, solved

    # 8 -------------------------------------------------------------------------------------------

    def assignment(
        self, ctx: ModelContext, outcome: StagesOutcome, greedy: Placement, unconfirmed: bool
    ) -> Placement:
        """GPU indices for the final solution; the greedy placement itself where no solve confirmed it."""
        values = outcome.solution
        assert values is not None
        solved_at = time.perf_counter()
        if unconfirmed:
            placement = greedy
            self.notes.append(
                "every workload in the window fits at once; the greedy BestFit placement is kept"
            )
        else:
            placement = build_placement(
                ctx.vars, lambda var: values[var.index] if var.index < len(values) else 0
            )
        self.seconds["assign"] = time.perf_counter() - solved_at
        return placement

    # 9 -------------------------------------------------------------------------------------------

    def compare_with_greedy(self, placement: Placement, greedy: Placement) -> float | None:
        """The greedy plan's admitted work (GPUs) where it beats ours priority by priority, else None.

        The solver can only end behind BestFit when the time limit cut it short; the
        greedy placement is then returned instead, with the solver's bound.
        """
        mine = admitted_vector(self.snapshot, self.settings, placement)
        theirs = admitted_vector(self.snapshot, self.settings, greedy)
        return sum(theirs.values()) / FULL_GPU_MILLI if lex_less(mine, theirs) else None

    # 10 ------------------------------------------------------------------------------------------

    def result(
        self, ctx: ModelContext, outcome: StagesOutcome, placement: Placement, greedy_value: float | None
    ) -> SolveResult:
        """Status, stage values, bound and gap of ``placement``; ``greedy_value`` if it is the greedy one."""
        problem = ctx.problem
        capacity = capacity_bounds(problem, outcome)
        objective, bound, gap = report(outcome, capacity)
        for stage in outcome.results:
            if stage.admission and capacity.get(stage.name, stage.value) < stage.value - 1e-6:
                self.notes.append(
                    f"the bound of stage {stage.name} could not be confirmed (its GPU-capacity estimate is "
                    "below what the plan admits), so the plan reports the admitted value as its bound; "
                    "please report this with the snapshot"
                )
        warnings = self.notes + self.model_warnings(problem)
        if greedy_value is not None:
            warnings.append(
                "the greedy BestFit placement admits more (priority by priority) than the best solver "
                "solution found in the time limit, so the plan is the greedy placement"
            )
            if bound:
                gap = max(0.0, (bound - greedy_value) / bound)
        objective["gpus"] = round(gpus_admitted(self.snapshot, placement), 3)
        return SolveResult(
            placement,
            PlanStatus.OPTIMAL if outcome.optimal else PlanStatus.FEASIBLE,
            seconds=round(time.perf_counter() - self.started, 4),
            objective=objective,
            bound=bound,
            gap=gap,
            warnings=tuple(warnings),
            log=tuple(self.log(ctx, outcome)),
            beyond_window=tuple(w.key for w in problem.beyond_window if w.key not in placement.admitted),
        )

    def model_warnings(self, problem: Problem) -> list[str]:
        """What the window and candidate pruning left out of the model."""
        settings = self.settings
        warnings = []
        if problem.beyond_window:
            warnings.append(
                f"{len(problem.beyond_window)} workloads beyond the planning window (queue head whose demand "
                f"is {settings.window_factor:g}x the free GPUs) were deferred without being planned"
            )
        if problem.pruned:
            warnings.append(
                f"{problem.pruned} pod sets could use more nodes than the model holds: each was planned on "
                f"a bounded list of about {settings.candidates_per_podset} candidate nodes, and the status "
                "and bound refer to that choice"
            )
        return warnings

    def log(self, ctx: ModelContext, outcome: StagesOutcome) -> list[str]:
        proto = ctx.model.proto
        seconds = self.seconds
        sizes = f"{len(ctx.vars.workloads)} workloads, {len(ctx.vars.pod_sets)} podsets"
        return [
            f"greedy BestFit hint in {seconds['greedy']:.2f}s",
            f"admission model built in {seconds['admission model']:.2f}s: {sizes} "
            f"(whole model: {len(proto.variables)} variables, "
            f"{len(proto.constraints)} constraints)",
            f"quality model (admitted set fixed) built in {seconds['quality model']:.2f}s",
            *(
                f"stage {r.name}: {r.status} value {r.value:g} bound {r.bound:g} in {r.seconds:.2f}s"
                + self.neighbourhood_note(outcome, r.name)
                for r in outcome.results
            ),
            f"GPU indices assigned in {seconds['assign']:.2f}s",
        ]

    @staticmethod
    def neighbourhood_note(outcome: StagesOutcome, stage: str) -> str:
        found = outcome.neighbourhoods.get(stage)
        return f" ({found[0]} neighbourhood solves, {found[1]} improved)" if found else ""

    def fallback(self, greedy: Placement, why: str) -> SolveResult:
        return SolveResult(
            greedy,
            PlanStatus.FALLBACK,
            seconds=round(time.perf_counter() - self.started, 4),
            objective={"gpus": round(gpus_admitted(self.snapshot, greedy), 3)},
            warnings=(f"the plan is the greedy BestFit placement: {why}",),
        )
