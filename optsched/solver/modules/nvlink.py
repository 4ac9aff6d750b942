"""NVLink islands: a multi-GPU pod that fits in one island should get one island.

Only nodes with more than one island need a model (an NVSwitch board is one
island: any pod that fits the node fits the island). There, for each pod size
g, ``z[node, island, g]`` counts pods of size g placed wholly inside that island;
islands never hold more than their free GPUs. Pods of size g on the node beyond
the in-island count span islands and cost ``g`` each in the topology stage.
Because in-island pods fit their island and the rest only need free GPUs
anywhere, the counts always translate into concrete GPU indices after the solve.

Three modules share that model:

* :class:`NvlinkRequired` (admission): ``nvlink: required`` PodSets must be
  fully counted in-island. It is the job's own demand, so it stays on when
  the preference is switched off; with the preference on, it models every
  multi-GPU size on those nodes at once, so the preference can price them.
* :class:`NvlinkIslands` (quality): the island counts of the other
  multi-island nodes, once the admitted set is fixed and the model is small.
* :class:`NvlinkPreference` (quality): the prices, in the topology stage, and
  the nvlink-fit stage for pods too big for every island of their node.

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

from optsched.capacity.state import NodeState
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintRule, HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import Candidate, IslandNode, PodSetVars

Sizes = dict[int, list[tuple[PodSetVars, Candidate]]]


class NvlinkRequired:
    """Island counts with the admission model, on nodes a PodSet that requires NVLink may use."""

    name = "nvlink-required"
    phase = Phase.ADMISSION
    stages: tuple[Stage, ...] = ()

    def __init__(self, preference: bool = True) -> None:
        self.preference = preference
        """With the preference on, every multi-GPU size on such a node is counted here."""
        self.switch = Switch("nvlink", on=preference)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        for n, entries in ctx.vars.by_node.items():
            node = ctx.nodes[n]
            if len(node.islands) < 2 or not any(e.pod_set.nvlink_required for e, _ in entries):
                continue
            sizes = _sizes(node, entries)
            if not sizes:
                continue
            record = IslandNode(n, sizes, node.indices_known)
            ctx.vars.islands.add(record)
            required = any(e.pod_set.nvlink_required for items in sizes.values() for e, _ in items)
            if record.known and (self.preference or required):
                _count(ctx, record)
        return []


class NvlinkIslands:
    """Island counts with the quality model, on the multi-island nodes not modelled yet."""

    name = "nvlink-islands"
    phase = Phase.QUALITY
    switch = Switch("nvlink")
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        for n, entries in ctx.vars.by_node.items():
            node = ctx.nodes[n]
            if len(node.islands) < 2 or ctx.vars.islands.modelled(n):
                continue
            sizes = _sizes(node, entries)
            if not sizes:
                continue
            record = IslandNode(n, sizes, node.indices_known)
            ctx.vars.islands.add(record)
            if record.known:
                _count(ctx, record)
        return []


class NvlinkPreference:
    """Pods that span islands cost their GPU count, in the topology stage; too-big pods in their own."""

    name = "nvlink"
    phase = Phase.QUALITY
    switch = Switch("nvlink")
    stages = (Stage.TOPOLOGY, Stage.NVLINK_FIT)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        per_gpu = ctx.settings.topology.nvlink_pod * weight
        if not per_gpu:
            return []
        spans = [item for record in ctx.vars.islands.nodes() for item in _spans(record)]
        terms = []
        if spans:
            expr = cp_model.LinearExpr.weighted_sum([v for v, _ in spans], [c * per_gpu for _, c in spans])
            terms.append(ObjectiveTerm(Stage.TOPOLOGY, expr))
        big = _too_big_for_any_island(ctx)
        if big:
            expr = cp_model.LinearExpr.weighted_sum([v for v, _ in big], [c for _, c in big])
            terms.append(ObjectiveTerm(Stage.NVLINK_FIT, expr))
        return terms


def _sizes(node: NodeState, entries: list[tuple[PodSetVars, Candidate]]) -> Sizes:
    """Multi-GPU pod sizes that fit some island of the node, with the PodSets of each size."""
    largest = max(len(i) for i in node.islands)
    sizes: Sizes = {}
    for e, c in entries:
        if 2 <= e.whole_gpus <= largest:
            sizes.setdefault(e.whole_gpus, []).append((e, c))
    return sizes


def _count(ctx: ModelContext, record: IslandNode) -> None:
    """In-island counts per island and size, within each island's free GPUs."""
    model = ctx.model
    n = record.node
    node = ctx.nodes[n]
    free = set(node.fully_free_gpus())
    island_free = [len(free.intersection(island)) for island in node.islands]
    per_island: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in node.islands]
    for g, items in sorted(record.sizes.items()):
        inside = []
        for i, room in enumerate(island_free):
            if room >= g:
                z = model.new_int_var(0, room // g, f"z[{n},{i},{g}]")
                record.counts[(i, g)] = z
                per_island[i].append((g, z))
                inside.append(z)
        in_islands = sum(inside, start=0)
        model.add(in_islands <= sum((c.y for _, c in items), start=0))
        required = [c.y for e, c in items if e.pod_set.nvlink_required]
        if required:
            model.add(in_islands >= sum(required, start=0))
    record.counted = True
    _hints(ctx, record, island_free)
    for i, terms in enumerate(per_island):
        if terms and sum(g * (island_free[i] // g) for g, _ in terms) > island_free[i]:
            model.add(
                cp_model.LinearExpr.weighted_sum([z for _, z in terms], [g for g, _ in terms])
                <= island_free[i]
            )


def _spans(record: IslandNode) -> list[tuple[cp_model.IntVar, int]]:
    """(variable, GPUs) whose sum is the GPUs of the node's pods that span islands."""
    if not record.known:
        return [(c.y, g) for g, items in record.sizes.items() for _, c in items]
    if not record.counted:
        return []
    out: list[tuple[cp_model.IntVar, int]] = []
    for g, items in sorted(record.sizes.items()):
        out += [(c.y, g) for _, c in items]
        out += [(z, -g) for z in record.inside(g)]
    return out


def _too_big_for_any_island(ctx: ModelContext) -> list[tuple[cp_model.IntVar, int]]:
    """Pods that span islands on whichever GPUs they get there: cost ``g`` each, like any split."""
    penalties: list[tuple[cp_model.IntVar, int]] = []
    for n, entries in ctx.vars.by_node.items():
        islands = ctx.nodes[n].islands
        if len(islands) < 2:
            continue
        largest = max(len(island) for island in islands)
        for e, c in entries:
            if e.whole_gpus >= 2 and e.whole_gpus > largest:
                penalties.append((c.y, e.whole_gpus))
    return penalties


def _hints(ctx: ModelContext, record: IslandNode, island_free: list[int]) -> None:
    """In-island counts: from the greedy plan's GPU indices, else first fit by size, biggest first."""
    n, sizes = record.node, record.sizes
    islands = ctx.nodes[n].islands

    def counts(h: HintView) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        if h.gpus:
            for g, items in sizes.items():
                # A PodSet appears once per flavor that accepts the node; its pods count once.
                for e in dict.fromkeys(e for e, _ in items):
                    for gpus in h.gpus.get((e.index, n), []):
                        for i, island in enumerate(islands):
                            if set(gpus) <= set(island):
                                out[(i, g)] = out.get((i, g), 0) + 1
            return out
        room = list(island_free)
        for g in sorted(sizes, reverse=True):
            left = sum(h(c.y) for _, c in sizes[g])
            for i in range(len(room)):
                take = min(left, room[i] // g)
                if take:
                    out[(i, g)] = take
                    room[i] -= take * g
                    left -= take
        return out

    for (i, g), var in record.counts.items():
        ctx.derive(var, _count_of(counts, i, g))


def _count_of(counts: Callable[[HintView], dict[tuple[int, int], int]], island: int, size: int) -> HintRule:
    def rule(h: HintView) -> int:
        return counts(h).get((island, size), 0)

    return rule
