"""Stability: fewer changes against the previous plan.

Every pod the previous plan put on a node and this plan does not put there
counts once (a deferred workload moves all its pods). Admitting more work is
not a change this stage resists: the admission stages come first.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from optsched.solver.context import HintRule, HintView, ObjectiveTerm, SolverContext

STABILITY_RANK = (3, 0)


def previous_pods(ctx: SolverContext) -> dict[tuple[str, str], Counter[str]]:
    """(workload key, PodSet name) -> pods per node in the previous plan's admissions."""
    out: dict[tuple[str, str], Counter[str]] = {}
    if ctx.previous is None:
        return out
    for decision in ctx.previous.workloads:
        if decision.decision != "admit":
            continue
        for ps in decision.pod_sets:
            out[(decision.name, ps.name)] = Counter(p.node for p in ps.pods)
    return out


class Stability:
    phase = "quality"
    name = "stability"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        settings = ctx.settings.modules.stability
        if ctx.previous is None or not settings.enabled or settings.weight == 0:
            return []
        before = previous_pods(ctx)
        index = {node.name: i for i, node in enumerate(ctx.snapshot.nodes)}
        model = ctx.model
        moved: list[cp_model.IntVar] = []
        for ps in ctx.pod_sets:
            counts = before.get((ps.workload.workload.key, ps.pod_set.name))
            if not counts:
                continue
            position = {n: pos for pos, n in enumerate(ps.nodes)}
            for name, count in sorted(counts.items()):
                pos = position.get(index.get(name, -1))
                if pos is None:
                    moved.append(model.new_constant(count))
                    continue
                m = model.new_int_var(0, count, f"moved[{ps.index},{pos}]")
                model.add(m >= count - ps.y[pos])
                ctx.derive(m, _shortfall(count, ps.y[pos]))
                moved.append(m)
        if not moved:
            return []
        expr = cp_model.LinearExpr.weighted_sum(moved, [settings.weight] * len(moved))
        return [ObjectiveTerm("stability", STABILITY_RANK, expr)]


def _shortfall(count: int, y: cp_model.IntVar) -> HintRule:
    def rule(h: HintView) -> int:
        return max(0, count - h(y))

    return rule
