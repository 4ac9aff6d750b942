"""Admission objectives: one stage per priority level, each maximising the work it admits.

A stage maximises the GPUs admitted at its level (each pod at
:func:`~optsched.solver.objective.pod_value`, ageing included), and the next
stage may not lower it, so no workload is deferred so that lower-priority work
can take its place. Where the stages sit in the lexicographic order is
:mod:`optsched.solver.objective`'s to say.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import ModelContext, Switch
from optsched.solver.objective import ObjectiveTerm, Phase, Stage, pod_value


class Admission:
    name = "admission"
    phase = Phase.ADMISSION
    switch: Switch | None = None
    stages = (Stage.PRIORITY,)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        by_level: dict[int, tuple[list[cp_model.IntVar], list[int]]] = {}
        for ps in ctx.vars.pod_sets:
            value = pod_value(ps.request, ps.owner.age_hours, ctx.settings.ageing)
            variables, coefs = by_level.setdefault(ps.workload.priority, ([], []))
            variables.extend(ps.ys)
            coefs.extend([value] * len(ps.candidates))
        terms = []
        for priority in sorted(by_level, reverse=True):
            variables, coefs = by_level[priority]
            expr = cp_model.LinearExpr.weighted_sum(variables, coefs)
            terms.append(
                ObjectiveTerm(
                    Stage.PRIORITY, expr, maximize=True, scale=float(FULL_GPU_MILLI), priority=priority
                )
            )
        return terms
