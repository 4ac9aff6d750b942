"""Warm starts: the greedy plan (and later the admission solution) as a complete hint.

The greedy BestFit placement fixes the admission and count variables; the
hint rules every module registered (:mod:`optsched.solver.hints`) complete the
rest, so CP-SAT starts from a plan at least as good as BestFit. Priority
levels the greedy plan admits whole need no search at all: their optimum is
known before the solve.
"""

from __future__ import annotations

from optsched.model.placement import Placement
from optsched.solver.context import ModelContext
from optsched.solver.hints import HintView, write_hint
from optsched.solver.objective import ObjectiveTerm, pod_value, priority_stage
from optsched.solver.stages import stage_values
from optsched.solver.variables import Candidate, PodSetVars, Variables, WorkloadVars


def greedy_view(variables: Variables, greedy: Placement) -> HintView:
    """The greedy placement as model values: admissions, pod counts per node and GPU indices."""
    index = {node.name: i for i, node in enumerate(variables.problem.snapshot.nodes)}
    values: dict[int, int] = {}
    gpus: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for entry in variables.workloads:
        assignment = greedy.admitted.get(entry.workload.key)
        values[entry.admit.index] = int(assignment is not None)
        for ps in entry.pod_sets:
            counts: dict[int, int] = {}
            if assignment is not None:
                for pod in assignment.pods.get(ps.pod_set.name, []):
                    n = index.get(pod.node, -1)
                    counts[n] = counts.get(n, 0) + 1
                    gpus.setdefault((ps.index, n), []).append(tuple(pod.gpus or ()))
            flavor = assignment.flavors.get(ps.pod_set.name) if assignment is not None else None
            for c in ps.candidates:
                values[c.y.index] = counts.get(c.node, 0) if c is _under(ps, c.node, flavor) else 0
    return HintView(values, gpus)


def _under(ps: PodSetVars, node: int, flavor: str | None) -> Candidate:
    """The candidate on ``node`` with the known placement's flavor (else the node's first)."""
    found = ps.all_on(node)
    return next((c for c in found if c.flavor == flavor), found[0])


def hint_greedy(ctx: ModelContext, greedy: Placement) -> dict[int, int]:
    """Hint the complete greedy solution; returns it (variable index -> value)."""
    values = ctx.hints.complete(greedy_view(ctx.vars, greedy))
    ctx.hints.clear()
    write_hint(ctx.model, values)
    return values


def quality_start(
    ctx: ModelContext,
    terms: list[ObjectiveTerm],
    admitted: list[int],
    greedy: Placement,
    greedy_hint: dict[int, int],
) -> list[int]:
    """The better start for the quality stages: the admission solution or the greedy placement.

    The admission solve ends wherever its search stopped, with pods placed for
    admission only; when the greedy plan admits exactly the same workloads its
    placement is a valid start too, and often a much tidier one (BestFit packs
    and keeps gangs together). Each is completed with the quality modules' rules
    and the one with the lower stage costs, stage by stage, becomes the hint and
    the fallback solution, so the quality stages never end worse than BestFit.
    """
    size = len(ctx.model.proto.variables)
    starts = [ctx.hints.complete(HintView(dict(enumerate(admitted)), {}))]
    if all(greedy_hint.get(e.admit.index, 0) == int(ctx.vars.is_active(e)) for e in ctx.vars.workloads):
        view = greedy_view(ctx.vars, greedy)
        starts.append(ctx.hints.complete(HintView({**greedy_hint, **view.values}, view.gpus)))
    best = min(starts, key=lambda values: stage_values(terms, values))
    ctx.hints.clear()
    write_hint(ctx.model, best)
    return [best.get(i, 0) for i in range(size)]


def known_optima(variables: Variables, greedy: Placement) -> dict[str, int]:
    """Leading priority levels whose window workloads the greedy plan admits whole need no solve."""
    levels: dict[int, list[WorkloadVars]] = {}
    for entry in variables.workloads:
        levels.setdefault(entry.workload.priority, []).append(entry)
    ageing = variables.problem.settings.ageing
    known: dict[str, int] = {}
    for priority in sorted(levels, reverse=True):
        total = 0
        for entry in levels[priority]:
            assignment = greedy.admitted.get(entry.workload.key)
            if assignment is None:
                return known
            for ps in entry.pod_sets:
                if len(assignment.pods.get(ps.pod_set.name, [])) != ps.pod_set.count:
                    return known
                total += ps.pod_set.count * pod_value(ps.request, entry.planned.age_hours, ageing)
        known[priority_stage(priority)] = total
    return known
