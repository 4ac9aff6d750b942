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

Untouched GPUs that shares open (node capacity's slots) count as placed.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintRule, HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import PodSetVars

OPEN_NODE_COST = FULL_GPU_MILLI
BEST_FIT_COST = 10


def whole_shapes(pod_sets: tuple[PodSetVars, ...]) -> dict[int, float]:
    """Popularity of whole-GPU pod sizes among the window's GPU pods (shares count in the total)."""
    sizes: Counter[int] = Counter()
    total = 0
    for ps in pod_sets:
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
    name = "packing"
    phase = Phase.QUALITY
    switch = Switch("packing")
    stages = (Stage.PACKING,)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        shapes = whole_shapes(ctx.vars.pod_sets)
        variables: list[cp_model.IntVar] = []
        coefs: list[int] = []
        for n in sorted(ctx.vars.by_node):
            node = ctx.nodes[n]
            free = node.whole_free
            whole = ctx.vars.whole_gpu_terms(n)
            touched = ctx.vars.shares.slots(n)
            if free == 0 or (not whole and not touched):
                continue
            empty = node.free_gpu_milli == sum(node.healthy) * FULL_GPU_MILLI and node.cpu == node.cpu_total
            choice = [model.new_bool_var(f"left[{n},{k}]") for k in range(free + 1)]
            model.add_exactly_one(choice)
            placed = ([v for _, v in whole] + touched, [g for g, _ in whole] + [1] * len(touched))
            model.add(
                cp_model.LinearExpr.weighted_sum(*placed)
                + cp_model.LinearExpr.weighted_sum(choice, list(range(free + 1)))
                == free
            )
            for k, var in enumerate(choice):
                ctx.derive(var, _leftover_is(k, free, *placed))
                cost = leftover_cost(k, free, empty, shapes)
                if cost:
                    variables.append(var)
                    coefs.append(cost * weight)
        if not variables:
            return []
        expr = cp_model.LinearExpr.weighted_sum(variables, coefs)
        return [ObjectiveTerm(Stage.PACKING, expr, scale=float(FULL_GPU_MILLI))]


def _leftover_is(k: int, free: int, variables: list[cp_model.IntVar], coefs: list[int]) -> HintRule:
    def rule(h: HintView) -> int:
        return int(free - h.linear(variables, coefs) == k)

    return rule
