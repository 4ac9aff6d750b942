"""One GPU product per gang: mixing A100 and H100 in one training job is a performance bug.

A workload whose GPU PodSets could land on more than one product picks exactly
one product (a Boolean per product, one of them true when admitted) and every
pod goes on nodes of that product. PodSets that all carry the
allow-mixed-products annotation are left free.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.solver.context import ObjectiveTerm, SolverContext, any_of


class OneProduct:
    phase = "admission"
    name = "product"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        if not ctx.settings.modules.product.enabled:
            return []
        model = ctx.model
        for entry in ctx.workloads:
            gpu_sets = [ps for ps in entry.pod_sets if ps.request.gpus]
            if not gpu_sets or all(ps.pod_set.allow_mixed_products for ps in gpu_sets):
                continue
            products = sorted({ctx.node(n).product for ps in gpu_sets for n in ps.nodes})
            if len(products) < 2:
                continue
            chosen = {p: model.new_bool_var(f"product[{entry.index},{p}]") for p in products}
            model.add(sum(chosen.values(), start=0) == entry.admit)
            on: dict[str, list[cp_model.IntVar]] = {p: [] for p in products}
            for ps in gpu_sets:
                for pos, n in enumerate(ps.nodes):
                    product = ctx.node(n).product
                    model.add(ps.y[pos] <= ps.ub[pos] * chosen[product])
                    on[product].append(ps.y[pos])
            for product, var in chosen.items():
                ctx.derive(var, any_of(on[product]))
        return []
