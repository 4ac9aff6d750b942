"""Admission objectives: priority levels first, then GPUs admitted with an ageing bonus.

One lexicographic stage per distinct priority level, highest first: a stage
maximises the GPUs admitted at its level, and the next stage may not lower it.
That is exactly BRIEF 2.4 (1): no workload is deferred so that lower-priority
work can take its place. Separate stages were chosen over big weights because
the number of levels in a window is small (usually two or three) and big
weights would make the reported gap meaningless.

Within a level each pod counts its GPUs in milli-GPUs times
``1 + min(cap, per_hour * hours waited)``; a CPU-only pod counts one milli so
it is still admitted when it fits.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest
from optsched.settings import AgeingSettings
from optsched.solver.context import ObjectiveTerm, SolverContext

ADMISSION_RANK = 0


def pod_value(req: PodRequest, age_hours: float, ageing: AgeingSettings) -> int:
    """Objective value of one admitted pod (milli-GPUs, ageing included)."""
    base = req.gpu_milli if req.is_share else req.gpus * FULL_GPU_MILLI
    if base == 0:
        return 1
    bonus = min(ageing.cap, ageing.per_hour * age_hours)
    return round(base * (1.0 + bonus))


def stage_name(priority: int) -> str:
    return f"priority:{priority}"


class Admission:
    phase = "admission"
    name = "admission"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        by_level: dict[int, tuple[list[cp_model.IntVar], list[int]]] = {}
        for ps in ctx.pod_sets:
            value = pod_value(ps.request, ps.workload.age_hours, ctx.settings.ageing)
            variables, coefs = by_level.setdefault(ps.workload.workload.priority, ([], []))
            variables.extend(ps.y)
            coefs.extend([value] * len(ps.y))
        terms = []
        for priority in sorted(by_level, reverse=True):
            variables, coefs = by_level[priority]
            expr = cp_model.LinearExpr.weighted_sum(variables, coefs)
            terms.append(
                ObjectiveTerm(
                    stage_name(priority),
                    (ADMISSION_RANK, -priority),
                    expr,
                    maximize=True,
                    scale=float(FULL_GPU_MILLI),
                )
            )
        return terms
