"""One GPU product per gang: mixing A100 and H100 in one training job is a performance bug.

A workload whose GPU PodSets could land on more than one product picks exactly
one product (a Boolean per product, one of them true when admitted) and every
pod goes on nodes of that product. PodSets that all carry the
allow-mixed-products annotation are left free.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import any_of
from optsched.solver.objective import ObjectiveTerm, Phase, Stage


class OneProduct:
    name = "product"
    phase = Phase.ADMISSION
    switch = Switch("product")
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        for entry in ctx.vars.workloads:
            gpu_sets = [ps for ps in entry.pod_sets if ps.request.gpus]
            if not gpu_sets or all(ps.pod_set.allow_mixed_products for ps in gpu_sets):
                continue
            products = sorted({ctx.node(c.node).product for ps in gpu_sets for c in ps.candidates})
            if len(products) < 2:
                continue
            chosen = {p: model.new_bool_var(f"product[{entry.index},{p}]") for p in products}
            model.add(sum(chosen.values(), start=0) == entry.admit)
            on: dict[str, list[cp_model.IntVar]] = {p: [] for p in products}
            for ps in gpu_sets:
                for c in ps.candidates:
                    product = ctx.node(c.node).product
                    model.add(c.y <= c.ub * chosen[product])
                    on[product].append(c.y)
            for product, var in chosen.items():
                ctx.derive(var, any_of(on[product]))
        return []
