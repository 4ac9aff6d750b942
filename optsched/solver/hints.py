"""Complete solution hints: the greedy plan (and later the admission solution) as a full assignment.

CP-SAT uses a complete, feasible hint as its first solution at once; a partial
one it may fail to complete in a short time limit. The placement fixes the
count variables; every module registers how its auxiliary variables follow
from them (``SolverContext.derive``), and those rules fill in the rest.
"""

from __future__ import annotations

from optsched.model.placement import Placement
from optsched.solver.context import HintView, ObjectiveTerm, SolverContext, WorkloadEntry
from optsched.solver.modules.admission import pod_value, stage_name
from optsched.solver.stages import stage_values


def hint_greedy(ctx: SolverContext, greedy: Placement) -> dict[int, int]:
    """Hint the complete greedy solution: CP-SAT starts from a plan at least as good as BestFit."""
    return derive_and_hint(ctx, greedy_view(ctx, greedy))


def greedy_view(ctx: SolverContext, greedy: Placement) -> HintView:
    """The greedy placement as model values: admissions, pod counts per node and GPU indices."""
    index = {node.name: i for i, node in enumerate(ctx.snapshot.nodes)}
    values: dict[int, int] = {}
    gpus: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for entry in ctx.workloads:
        assignment = greedy.admitted.get(entry.workload.key)
        values[entry.admit.index] = int(assignment is not None)
        for ps in entry.pod_sets:
            counts: dict[int, int] = {}
            if assignment is not None:
                for pod in assignment.pods.get(ps.pod_set.name, []):
                    n = index.get(pod.node, -1)
                    counts[n] = counts.get(n, 0) + 1
                    gpus.setdefault((ps.index, n), []).append(tuple(pod.gpus or ()))
            for pos, n in enumerate(ps.nodes):
                values[ps.y[pos].index] = counts.get(n, 0)
    return HintView(values, gpus)


def derive_and_hint(ctx: SolverContext, view: HintView) -> dict[int, int]:
    """Complete ``view`` with every registered auxiliary rule and make it the model's hint."""
    values = complete(ctx, view)
    ctx.hint_rules.clear()
    apply_hint(ctx, values)
    return values


def complete(ctx: SolverContext, view: HintView) -> dict[int, int]:
    """``view``'s values plus every registered auxiliary rule's (the rules stay registered)."""
    for var, rule in ctx.hint_rules:
        view.values[var.index] = rule(view)
    return view.values


def apply_hint(ctx: SolverContext, values: dict[int, int]) -> None:
    """Make ``values`` the model's whole hint."""
    ctx.model.clear_hints()  # type: ignore[no-untyped-call]
    hint = ctx.model.proto.solution_hint
    items = sorted(values.items())
    hint.vars.extend(i for i, _ in items)
    hint.values.extend(v for _, v in items)


def quality_start(
    ctx: SolverContext,
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
    starts = [complete(ctx, HintView(dict(enumerate(admitted)), {}))]
    if all(greedy_hint.get(e.admit.index, 0) == int(ctx.is_active(e)) for e in ctx.workloads):
        view = greedy_view(ctx, greedy)
        starts.append(complete(ctx, HintView({**greedy_hint, **view.values}, view.gpus)))
    best = min(starts, key=lambda values: stage_values(terms, values))
    ctx.hint_rules.clear()
    apply_hint(ctx, best)
    return [best.get(i, 0) for i in range(size)]


def known_optima(ctx: SolverContext, greedy: Placement) -> None:
    """Leading priority levels whose window workloads the greedy plan admits whole need no solve."""
    levels: dict[int, list[WorkloadEntry]] = {}
    for entry in ctx.workloads:
        levels.setdefault(entry.workload.priority, []).append(entry)
    for priority in sorted(levels, reverse=True):
        total = 0
        for entry in levels[priority]:
            assignment = greedy.admitted.get(entry.workload.key)
            if assignment is None:
                return
            for ps in entry.pod_sets:
                if len(assignment.pods.get(ps.pod_set.name, [])) != ps.pod_set.count:
                    return
                total += ps.pod_set.count * pod_value(ps.request, entry.age_hours, ctx.settings.ageing)
        ctx.known_optimum[stage_name(priority)] = total
