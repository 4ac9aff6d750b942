"""One flavor per PodSet: a plan names one ResourceFlavor for each PodSet it admits.

Where a PodSet's candidate nodes span several flavors, a Boolean per flavor
selects one, and only nodes of that flavor take pods. This is a rule of every
plan, so it holds with the quota switched off too; quota is then simply not
counted against the chosen flavor.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintRule, HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import PodSetVars


class OneFlavor:
    name = "flavor"
    phase = Phase.ADMISSION
    switch: Switch | None = None
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        for ps in ctx.vars.pod_sets:
            flavors = {c.flavor for c in ps.candidates}
            if len(flavors) < 2:
                continue
            names = sorted(flavors, key=lambda f: (f is None, f or ""))
            pick = {f: model.new_bool_var(f"flavor[{ps.index},{f}]") for f in names}
            model.add(sum(pick.values(), start=0) == ps.admit)
            for c in ps.candidates:
                model.add(c.y <= c.ub * pick[c.flavor])
            for f, var in pick.items():
                ys = [c.y for c in ps.candidates if c.flavor == f]
                ctx.derive(var, _flavor_hint(ys, ps, f == names[0]))
        return []


def _flavor_hint(ys: list[cp_model.IntVar], ps: PodSetVars, first: bool) -> HintRule:
    """The flavor the known placement uses (the first one where it places nothing)."""

    def rule(h: HintView) -> int:
        if any(h(y) for y in ys):
            return 1
        if not h(ps.admit) or any(h(y) for y in ps.ys):
            return 0
        return int(first)

    return rule
