"""Packing and fragmentation: leave free GPUs in shapes the queue can use.

For every node that may receive GPU pods, one Boolean per possible number of
whole GPUs left free (0..free now) selects the leftover; the leftover plus what
is placed equals what is free now. The cost of a leftover ``k`` is a table, so
any per-node measure stays linear:

* FGD (Weng et al., ATC'23) on whole GPUs: ``k`` GPUs are lost for every typical
  shape of the queue that needs more than ``k`` GPUs, weighted by how common
  the shape is (shares fit any free GPU, so they never strand whole ones);
* opening an untouched node costs one GPU's worth, so whole free nodes stay
  whole for the next big gang;
* a best-fit tie-break: GPUs placed on a node cost its free count, so partly
  used nodes fill first.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import HintRule, HintView, ObjectiveTerm, SolverContext

PACKING_RANK = (2, 0)
OPEN_NODE_COST = FULL_GPU_MILLI
BEST_FIT_COST = 10


def whole_shapes(ctx: SolverContext) -> dict[int, float]:
    """Popularity of whole-GPU pod sizes among the window's GPU pods (shares count in the total)."""
    sizes: Counter[int] = Counter()
    total = 0
    for ps in ctx.pod_sets:
        if ps.request.gpus == 0:
            continue
        total += ps.pod_set.count
        if not ps.is_share:
            sizes[ps.request.gpus] += ps.pod_set.count
    return {g: c / total for g, c in sizes.items()} if total else {}


def leftover_cost(k: int, free: int, empty: bool, shapes: dict[int, float]) -> int:
    """Cost of leaving ``k`` of ``free`` whole GPUs unused on a node (milli-GPU units)."""
    stranded = k * FULL_GPU_MILLI * sum(w for g, w in shapes.items() if g > k)
    cost = round(stranded)
    if empty and k < free:
        cost += OPEN_NODE_COST
    return cost + BEST_FIT_COST * (free - k) * free


class Packing:
    phase = "quality"
    name = "packing"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        settings = ctx.settings.modules.packing
        if not settings.enabled or settings.weight == 0:
            return []
        model = ctx.model
        shapes = whole_shapes(ctx)
        variables: list[cp_model.IntVar] = []
        coefs: list[int] = []
        for n in sorted(ctx.by_node):
            node = ctx.nodes[n]
            free = node.whole_free
            whole = ctx.whole_gpu_terms(n)
            touched = ctx.fresh_slots.get(n, [])
            if free == 0 or (not whole and not touched):
                continue
            empty = node.free_gpu_milli == sum(node.healthy) * FULL_GPU_MILLI and node.cpu == node.cpu_total
            choice = [model.new_bool_var(f"left[{n},{k}]") for k in range(free + 1)]
            model.add_exactly_one(choice)
            placed = cp_model.LinearExpr.weighted_sum(
                [v for _, v in whole] + touched, [g for g, _ in whole] + [1] * len(touched)
            )
            model.add(placed + cp_model.LinearExpr.weighted_sum(choice, list(range(free + 1))) == free)
            terms = ([v for _, v in whole] + touched, [g for g, _ in whole] + [1] * len(touched))
            for k, var in enumerate(choice):
                ctx.derive(var, _leftover_is(k, free, *terms))
                cost = leftover_cost(k, free, empty, shapes)
                if cost:
                    variables.append(var)
                    coefs.append(cost * settings.weight)
        if not variables:
            return []
        return [
            ObjectiveTerm(
                "packing",
                PACKING_RANK,
                cp_model.LinearExpr.weighted_sum(variables, coefs),
                scale=float(FULL_GPU_MILLI),
            )
        ]


def _leftover_is(k: int, free: int, variables: list[cp_model.IntVar], coefs: list[int]) -> HintRule:
    def rule(h: HintView) -> int:
        return int(free - h.linear(variables, coefs) == k)

    return rule
