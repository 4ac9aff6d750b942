"""NVLink islands: a multi-GPU pod that fits in one island should get one island.

Only nodes with more than one island need a model (an NVSwitch board is one
island: any pod that fits the node fits the island). There, for each pod size
g, ``z[node, island, g]`` counts pods of size g placed wholly inside that island;
islands never hold more than their free GPUs. Pods of size g on the node beyond
the in-island count span islands and cost ``g`` each in the topology stage.
``nvlink: required`` PodSets must be fully counted in-island (a hard
constraint, kept when the preference is switched off). Because in-island pods
fit their island and the rest only need free GPUs anywhere, the counts always
translate into concrete GPU indices after the solve.

On a node with index-unknown usage nobody knows which islands are free, so
every multi-GPU pod there counts as spanning (and ``nvlink: required`` PodSets
are not offered such nodes at all). A pod bigger than every island of its
node (a 4-GPU pod on an A100 PCIe box of NVLink pairs, or on a box without
NVLink) always spans there; its own stage, after packing, sends it to a node
whose island can hold it when that packs as well.
"""

from __future__ import annotations

from collections.abc import Callable

from ortools.sat.python import cp_model

from optsched.solver.context import HintRule, HintView, ObjectiveTerm, PodSetEntry, SolverContext

TOPOLOGY_RANK = (1, 0)
NVLINK_FIT_RANK = (2, 1)
"""After packing: a pod too big for every island of a node is sent to a box whose island holds it
only where that costs no packing. Ranked with the avoidable splits it would pull multi-GPU pods
onto NVSwitch boards at any price, splitting gangs over racks and stranding those boards' GPUs
for the 8-GPU pods that need them."""


class NvlinkIslands:
    """Island counts: with the admission model where a PodSet requires NVLink, else with quality."""

    name = "nvlink"

    def __init__(self, phase: str = "admission") -> None:
        self.phase = phase

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        model = ctx.model
        soft = ctx.settings.modules.nvlink.enabled
        weight = ctx.settings.topology.nvlink_pod * ctx.settings.modules.nvlink.weight
        penalty_vars: list[cp_model.LinearExprT] = []
        penalty_coefs: list[int] = []
        for n, entries in ctx.by_node.items():
            node = ctx.nodes[n]
            if len(node.islands) < 2 or n in ctx.island_nodes:
                continue
            hard = any(e.pod_set.nvlink_required for e, _ in entries)
            if self.phase == "admission" and not hard:
                continue
            largest = max(len(i) for i in node.islands)
            by_size: dict[int, list[tuple[PodSetEntry, int]]] = {}
            for e, p in entries:
                if 2 <= e.whole_gpus <= largest:
                    by_size.setdefault(e.whole_gpus, []).append((e, p))
            if not by_size:
                continue
            ctx.island_nodes.add(n)
            if not node.indices_known:
                for g, items in by_size.items():
                    for e, p in items:
                        penalty_vars.append(e.y[p])
                        penalty_coefs.append(g)
                continue
            need = soft or any(e.pod_set.nvlink_required for items in by_size.values() for e, _ in items)
            if not need:
                continue
            free = set(node.fully_free_gpus())
            island_free = [len(free.intersection(island)) for island in node.islands]
            per_island: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in node.islands]
            for g, items in sorted(by_size.items()):
                inside = []
                for i, room in enumerate(island_free):
                    if room >= g:
                        z = model.new_int_var(0, room // g, f"z[{n},{i},{g}]")
                        ctx.island_counts[(n, i, g)] = z
                        per_island[i].append((g, z))
                        inside.append(z)
                placed = sum((e.y[p] for e, p in items), start=0)
                in_islands = sum(inside, start=0)
                model.add(in_islands <= placed)
                required = [e.y[p] for e, p in items if e.pod_set.nvlink_required]
                if required:
                    model.add(in_islands >= sum(required, start=0))
                if soft:
                    for e, p in items:
                        penalty_vars.append(e.y[p])
                        penalty_coefs.append(g)
                    for z in inside:
                        penalty_vars.append(z)
                        penalty_coefs.append(-g)
            self._hints(ctx, n, by_size, island_free)
            for i, terms in enumerate(per_island):
                if terms and sum(g * (island_free[i] // g) for g, _ in terms) > island_free[i]:
                    model.add(
                        cp_model.LinearExpr.weighted_sum([z for _, z in terms], [g for g, _ in terms])
                        <= island_free[i]
                    )
        objective: list[ObjectiveTerm] = []
        if soft and weight and penalty_vars:
            expr = cp_model.LinearExpr.weighted_sum(penalty_vars, [c * weight for c in penalty_coefs])
            objective.append(ObjectiveTerm("topology", TOPOLOGY_RANK, expr))
        if soft and weight and self.phase == "quality":
            big = self._too_big_for_any_island(ctx)
            if big:
                expr = cp_model.LinearExpr.weighted_sum([v for v, _ in big], [c for _, c in big])
                objective.append(ObjectiveTerm("nvlink-fit", NVLINK_FIT_RANK, expr))
        return objective

    @staticmethod
    def _too_big_for_any_island(ctx: SolverContext) -> list[tuple[cp_model.IntVar, int]]:
        """Pods that span islands on whichever GPUs they get there: cost ``g`` each, like any split."""
        penalties: list[tuple[cp_model.IntVar, int]] = []
        for n, entries in ctx.by_node.items():
            islands = ctx.nodes[n].islands
            if len(islands) < 2:
                continue
            largest = max(len(island) for island in islands)
            for e, p in entries:
                if e.whole_gpus >= 2 and e.whole_gpus > largest:
                    penalties.append((e.y[p], e.whole_gpus))
        return penalties

    @staticmethod
    def _hints(
        ctx: SolverContext, n: int, by_size: dict[int, list[tuple[PodSetEntry, int]]], island_free: list[int]
    ) -> None:
        """In-island counts: from the greedy plan's GPU indices, else first fit by size, biggest first."""
        node = ctx.nodes[n]

        def counts(h: HintView) -> dict[tuple[int, int], int]:
            out: dict[tuple[int, int], int] = {}
            if h.gpus:
                for g, items in by_size.items():
                    for e, _ in items:
                        for gpus in h.gpus.get((e.index, n), []):
                            for i, island in enumerate(node.islands):
                                if set(gpus) <= set(island):
                                    out[(i, g)] = out.get((i, g), 0) + 1
                return out
            room = list(island_free)
            for g in sorted(by_size, reverse=True):
                left = sum(h(e.y[p]) for e, p in by_size[g])
                for i in range(len(room)):
                    take = min(left, room[i] // g)
                    if take:
                        out[(i, g)] = take
                        room[i] -= take * g
                        left -= take
            return out

        for (node_index, i, g), var in ctx.island_counts.items():
            if node_index == n:
                ctx.derive(var, _count_of(counts, i, g))


def _count_of(counts: Callable[[HintView], dict[tuple[int, int], int]], island: int, size: int) -> HintRule:
    def rule(h: HintView) -> int:
        return counts(h).get((island, size), 0)

    return rule
