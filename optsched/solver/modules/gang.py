"""Gang all-or-nothing: a workload runs whole (or with at least ``minCount`` pods) or not at all.

Kueue admits a Workload as a unit; a training job with half its workers
placed wastes the GPUs it holds. Each PodSet places between ``needed`` and
``count`` pods when the workload is admitted, and none when it is not.
"""

from __future__ import annotations

from optsched.solver.context import ObjectiveTerm, SolverContext


class Gang:
    phase = "admission"
    name = "gang"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        model = ctx.model
        for entry in ctx.workloads:
            for ps in entry.pod_sets:
                total = ps.total()
                needed, count = ps.pod_set.needed, ps.pod_set.count
                if not ps.y:
                    if needed > 0:
                        model.add(entry.admit == 0)
                    continue
                if ctx.settings.modules.gang.enabled:
                    if needed == count:
                        model.add(total == count * entry.admit)
                    else:
                        model.add(total >= needed * entry.admit)
                        model.add(total <= count * entry.admit)
                else:
                    model.add(total <= count * entry.admit)
        return []
