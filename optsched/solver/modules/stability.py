"""Stability: fewer changes against the previous plan.

Every pod the previous plan put on a node and this plan does not put there
counts once (a deferred workload moves all its pods). Admitting more work is
not a change this stage resists: the admission stages come first.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from optsched.model.plan import Plan
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintRule, HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage


def previous_pods(previous: Plan | None) -> dict[tuple[str, str], Counter[str]]:
    """(workload key, PodSet name) -> pods per node in the previous plan's admissions."""
    out: dict[tuple[str, str], Counter[str]] = {}
    if previous is None:
        return out
    for decision in previous.workloads:
        if decision.decision != "admit":
            continue
        for ps in decision.pod_sets:
            out[(decision.name, ps.name)] = Counter(p.node for p in ps.pods)
    return out


class Stability:
    name = "stability"
    phase = Phase.QUALITY
    switch = Switch("stability")
    stages = (Stage.STABILITY,)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        if ctx.problem.previous is None:
            return []
        before = previous_pods(ctx.problem.previous)
        index = {node.name: i for i, node in enumerate(ctx.snapshot.nodes)}
        model = ctx.model
        moved: list[cp_model.IntVar] = []
        for ps in ctx.vars.pod_sets:
            counts = before.get((ps.workload.key, ps.pod_set.name))
            if not counts:
                continue
            position: dict[int, int] = {}
            for pos, c in enumerate(ps.candidates):
                position.setdefault(c.node, pos)
            for name, count in sorted(counts.items()):
                node = index.get(name, -1)
                if node not in position:
                    moved.append(model.new_constant(count))
                    continue
                m = model.new_int_var(0, count, f"moved[{ps.index},{position[node]}]")
                model.add(m >= count - ps.pods_on(node))
                ctx.derive(m, _shortfall(count, [c.y for c in ps.all_on(node)]))
                moved.append(m)
        if not moved:
            return []
        expr = cp_model.LinearExpr.weighted_sum(moved, [weight] * len(moved))
        return [ObjectiveTerm(Stage.STABILITY, expr)]


def _shortfall(count: int, ys: list[cp_model.IntVar]) -> HintRule:
    def rule(h: HintView) -> int:
        return max(0, count - sum(h(y) for y in ys))

    return rule
