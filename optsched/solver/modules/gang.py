"""Gang all-or-nothing: a workload runs whole (or with at least ``minCount`` pods) or not at all.

Kueue admits a Workload as a unit; a training job with half its workers
placed wastes the GPUs it holds. Each PodSet places between ``needed`` and
``count`` pods when the workload is admitted, and none when it is not.
Switched off (for experiments only), :class:`PartialGang` still ties pods to
their workload's admission but lets any part of a gang run.
"""

from __future__ import annotations

from collections.abc import Iterator

from optsched.solver.context import ModelContext, Switch
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import PodSetVars


class Gang:
    name = "gang"
    phase = Phase.ADMISSION
    switch = Switch("gang")
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        for ps in _placeable(ctx):
            total, admit = ps.total(), ps.admit
            needed, count = ps.pod_set.needed, ps.pod_set.count
            if needed == count:
                model.add(total == count * admit)
            else:
                model.add(total >= needed * admit)
                model.add(total <= count * admit)
        return []


class PartialGang:
    """With the gang switch off: at most ``count`` pods, and only when the workload is admitted."""

    name = "partial-gang"
    phase = Phase.ADMISSION
    switch = Switch("gang", on=False)
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        for ps in _placeable(ctx):
            ctx.model.add(ps.total() <= ps.pod_set.count * ps.admit)
        return []


def _placeable(ctx: ModelContext) -> Iterator[PodSetVars]:
    """PodSets with candidate nodes, in order.

    A workload with a PodSet that needs pods but has no candidate is not
    admitted; that constraint is added as the PodSet is met, so the model
    keeps PodSet order.
    """
    for ps in ctx.vars.pod_sets:
        if ps.candidates:
            yield ps
        elif ps.pod_set.needed > 0:
            ctx.model.add(ps.admit == 0)
