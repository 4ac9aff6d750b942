"""``solve``: place the pending queue with CP-SAT, never worse than the greedy BestFit placement.

1. The greedy BestFit placement: the baseline, the first (complete) solution
   hint, and the fallback.
2. The planning window (:mod:`optsched.solver.window`) and the admission
   model: candidates, gangs, capacity, required NVLink and topology, products,
   quota, one objective stage per priority level.
3. Admission stages. A leading level the greedy plan admits whole has a known
   optimum and is pinned without a solve.
4. The admitted set is fixed, the quality modules (topology, NVLink and
   packing preferences, stability) are added, and their stages run from the
   admission solution.
5. Counts become pods with GPU indices (:mod:`optsched.solver.assign`), and
   the result is compared with the greedy plan priority level by priority
   level: if it is lexicographically worse (the time limit was too short),
   the greedy placement is returned with the solver's status and bound and a
   warning. No solver solution at all gives the greedy plan as ``FALLBACK``.

``Settings.time_limit_s`` is the CP-SAT search budget over all stages; the
greedy hint, model building and plan assembly are timed in the solver log.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ortools.sat.python import cp_model

from optsched.capacity.state import ClusterState
from optsched.model.placement import Placement
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import FULL_GPU_MILLI, Snapshot
from optsched.policies.choosers import BestFit
from optsched.policies.greedy import greedy_placement
from optsched.settings import Settings
from optsched.solver.assign import build_placement
from optsched.solver.context import ObjectiveTerm, SolverContext
from optsched.solver.hints import hint_greedy, known_optima, quality_start
from optsched.solver.modules import Module, default_modules
from optsched.solver.modules.admission import ADMISSION_RANK
from optsched.solver.report import admitted_vector, capacity_bounds, gpus_admitted, lex_less, report
from optsched.solver.result import SolveResult
from optsched.solver.stages import solve_stages
from optsched.solver.window import choose_window


def solve(
    snapshot: Snapshot,
    settings: Settings | None = None,
    previous: Plan | None = None,
    *,
    modules: Iterable[Module] | None = None,
) -> SolveResult:
    """Plan every pending workload of ``snapshot``; see the module docstring."""
    settings = settings or Settings()
    started = time.perf_counter()
    if not snapshot.workloads:
        return SolveResult(Placement(), PlanStatus.EMPTY)
    greedy = greedy_placement(snapshot, BestFit())
    greedy_seconds = time.perf_counter() - started
    if settings.force_fallback:
        return _fallback(snapshot, greedy, started, "the solver is switched off (force_fallback)")

    ctx = SolverContext(
        snapshot, settings, ClusterState.from_snapshot(snapshot), previous, cp_model.CpModel()
    )
    choose_window(ctx, greedy)
    chosen = list(modules) if modules is not None else default_modules()
    terms: list[ObjectiveTerm] = []
    for module in chosen:
        if module.phase == "admission":
            terms.extend(module.apply(ctx))
    hint = hint_greedy(ctx, greedy)
    known_optima(ctx, greedy)
    build_seconds = time.perf_counter() - started - greedy_seconds
    share = settings.admission_share if _quality_wanted(settings, previous) else 1.0
    clock = ctx.clock
    now = clock.now()
    admission_terms = [t for t in terms if t.rank[0] == ADMISSION_RANK]
    outcome = solve_stages(ctx, admission_terms, now + settings.time_limit_s * share)
    searched = clock.now() - now
    provisional = outcome.solution is None and not outcome.failure and bool(outcome.results)
    if provisional:
        # The greedy plan admits the whole window, which no plan can beat: start from it.
        outcome.solution = [hint.get(i, 0) for i in range(len(ctx.model.proto.variables))]
    if outcome.solution is None:
        return _fallback(snapshot, greedy, started, f"no solver solution ({outcome.failure})")
    # Fix what is admitted; the quality stages then work on a much smaller problem.
    admitted_solution = outcome.solution
    ctx.active = {e.index for e in ctx.workloads if admitted_solution[e.admit.index]}
    for entry in ctx.workloads:
        ctx.model.add(entry.admit == int(entry.index in ctx.active))
    ctx.index_by_node()
    quality_started = time.perf_counter()
    # Preference terms an admission module returned (NVLink islands on nodes it had to model
    # early) join the quality stages of the same name.
    quality_terms = [t for t in terms if t.rank[0] != ADMISSION_RANK]
    for module in chosen:
        if module.phase != "admission":
            quality_terms.extend(module.apply(ctx))
    start = quality_start(ctx, quality_terms, admitted_solution, greedy, hint)
    quality_seconds = time.perf_counter() - quality_started
    # The search budget excludes model building: the quality stages get what admission left.
    deadline = clock.now() + max(0.0, settings.time_limit_s - searched)
    later = solve_stages(ctx, quality_terms, deadline, solution=start)
    solved_quality = len(later.results) > 0
    later.results[:0] = outcome.results
    outcome = later
    values = outcome.solution
    assert values is not None
    solved_at = time.perf_counter()
    if provisional and not solved_quality:
        # No solve confirmed the greedy solution in this model: return the greedy placement itself.
        placement = greedy
        ctx.notes.append("every workload in the window fits at once; the greedy BestFit placement is kept")
    else:
        placement = build_placement(ctx, lambda var: values[var.index] if var.index < len(values) else 0)
    assign_seconds = time.perf_counter() - solved_at
    status = PlanStatus.OPTIMAL if outcome.optimal else PlanStatus.FEASIBLE
    capacity = capacity_bounds(ctx, outcome)
    objective, bound, gap = report(outcome, capacity)
    for result in outcome.results:
        if result.admission and capacity.get(result.name, result.value) < result.value - 1e-6:
            ctx.notes.append(f"internal: capacity bound of {result.name} below its achieved value")
    warnings = list(ctx.notes)
    if ctx.beyond_window:
        warnings.append(
            f"{len(ctx.beyond_window)} workloads beyond the planning window (queue head whose demand is "
            f"{settings.window_factor:g}x the free GPUs) were deferred without being planned"
        )
    if ctx.pruned:
        warnings.append(
            f"{ctx.pruned} PodSets were offered a bounded list of candidate nodes "
            f"(about {settings.candidates_per_podset}); the status and bound refer to that model"
        )
    mine, theirs = admitted_vector(ctx, placement), admitted_vector(ctx, greedy)
    if lex_less(mine, theirs):
        warnings.append(
            "the greedy BestFit placement admits more (priority by priority) than the best solver solution "
            "found in the time limit; returning the greedy placement"
        )
        placement = greedy
        value = sum(theirs.values()) / FULL_GPU_MILLI
        if bound:
            gap = max(0.0, (bound - value) / bound)
    beyond = tuple(w.key for w in ctx.beyond_window if w.key not in placement.admitted)
    objective["gpus"] = round(gpus_admitted(ctx.snapshot, placement), 3)
    log = [
        f"greedy BestFit hint in {greedy_seconds:.2f}s",
        f"admission model built in {build_seconds:.2f}s: {len(ctx.workloads)} workloads, "
        f"{len(ctx.pod_sets)} podsets (whole model: {len(ctx.model.proto.variables)} variables, "
        f"{len(ctx.model.proto.constraints)} constraints)",
    ]
    log.append(f"quality model (admitted set fixed) built in {quality_seconds:.2f}s")
    log += [
        f"stage {r.name}: {r.status} value {r.value:g} bound {r.bound:g} in {r.seconds:.2f}s"
        for r in outcome.results
    ]
    log.append(f"GPU indices assigned in {assign_seconds:.2f}s")
    return SolveResult(
        placement,
        status,
        seconds=round(time.perf_counter() - started, 4),
        objective=objective,
        bound=bound,
        gap=gap,
        warnings=tuple(warnings),
        log=tuple(log),
        beyond_window=beyond,
    )


def _quality_wanted(settings: Settings, previous: Plan | None) -> bool:
    switches = settings.modules
    return (
        switches.nvlink.enabled
        or switches.topology.enabled
        or switches.packing.enabled
        or (previous is not None and switches.stability.enabled)
    )


def _fallback(snapshot: Snapshot, greedy: Placement, started: float, why: str) -> SolveResult:
    return SolveResult(
        greedy,
        PlanStatus.FALLBACK,
        seconds=round(time.perf_counter() - started, 4),
        objective={"gpus": round(gpus_admitted(snapshot, greedy), 3)},
        warnings=(f"greedy BestFit plan returned: {why}",),
    )
