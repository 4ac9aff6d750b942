"""From solver counts to concrete pods and GPU indices.

The model decides how many pods of each PodSet go on each node, how many of
them sit wholly inside each NVLink island, and which GPU (or untouched GPU
slot) each share uses. Here those counts become pods with indices, node by
node, deterministically:

1. pods the model placed inside an island take that island's free GPUs
   (``nvlink: required`` PodSets first);
2. the remaining whole-GPU pods, biggest first, take GPUs through
   :meth:`NodeState.choose_gpus` (tightest island that holds them, else fewest
   islands);
3. shares go on the partly used GPU the model chose, or on the untouched GPUs
   left over, slot by slot.

The model's constraints guarantee every step succeeds; if one does not, the
model and this code disagree, which is a bug, so it raises instead of
returning a plan that cannot be realised. On a node with index-unknown usage,
whole-GPU pods get ``gpus=None``.
"""

from __future__ import annotations

from collections.abc import Callable

from ortools.sat.python import cp_model

from optsched.capacity.state import NodeState
from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.solver.context import PodSetEntry, SolverContext

Value = Callable[[cp_model.IntVar], int]
Pod = tuple[str, tuple[int, ...] | None]
"""One pod as the node-by-node assignment makes it: node and GPU indices (its index comes last)."""


class AssignmentError(RuntimeError):
    """The solver's counts could not be turned into GPU indices (a model bug)."""


def build_placement(ctx: SolverContext, value: Value) -> Placement:
    placement = Placement()
    pods: dict[int, list[Pod]] = {}
    on_node: dict[int, list[tuple[PodSetEntry, int]]] = {}
    admitted = {entry.index for entry in ctx.workloads if value(entry.admit)}
    for ps in ctx.pod_sets:
        if ps.workload.index not in admitted:
            continue
        pods[ps.index] = []
        for pos, n in enumerate(ps.nodes):
            count = value(ps.y[pos])
            if count:
                on_node.setdefault(n, []).append((ps, count))
    for n in sorted(on_node):
        for ps, assigned in _assign_node(ctx, n, on_node[n], value).items():
            pods[ps.index].extend(assigned)
    for entry in ctx.workloads:
        if entry.index not in admitted:
            continue
        assignment = WorkloadAssignment()
        for ps in entry.pod_sets:
            assignment.pods[ps.pod_set.name] = [
                PodPlacement(index=i, node=node, gpus=gpus) for i, (node, gpus) in enumerate(pods[ps.index])
            ]
            used = [ps.flavors[pos] for pos in range(len(ps.nodes)) if value(ps.y[pos])]
            assignment.flavors[ps.pod_set.name] = used[0] if used else (ps.flavors[0] if ps.flavors else None)
        placement.admitted[entry.workload.key] = assignment
    return placement


def _assign_node(
    ctx: SolverContext, n: int, items: list[tuple[PodSetEntry, int]], value: Value
) -> dict[PodSetEntry, list[Pod]]:
    state = ctx.nodes[n].copy()
    name = state.name
    out: dict[PodSetEntry, list[Pod]] = {ps: [] for ps, _ in items}
    remaining = {ps: count for ps, count in items if ps.whole_gpus}
    if state.indices_known:
        # 1. In-island pods, per island and size, as the model counted them.
        for i, island in enumerate(state.islands):
            for g in sorted({ps.whole_gpus for ps in remaining}, reverse=True):
                var = ctx.island_counts.get((n, i, g))
                inside = value(var) if var is not None else 0
                for _ in range(inside):
                    ps = _next_pod(remaining, g)
                    free = [gpu for gpu in island if state.is_fully_free(gpu)]
                    if ps is None or len(free) < g:
                        raise AssignmentError(
                            f"node {name}: island {i} cannot hold the {g}-GPU pods counted in it"
                        )
                    gpus = free[:g]
                    _book(state, ps, gpus)
                    out[ps].append((name, tuple(gpus)))
                    remaining[ps] -= 1
        # 2. The other whole-GPU pods, biggest first.
        for ps in sorted(remaining, key=lambda p: (-p.whole_gpus, p.index)):
            for _ in range(remaining[ps]):
                chosen = state.choose_gpus(ps.request)
                if chosen is None:
                    raise AssignmentError(f"node {name}: no {ps.whole_gpus} free GPUs left for {_label(ps)}")
                if ps.pod_set.nvlink_required and not state.in_one_island(chosen):
                    raise AssignmentError(f"node {name}: {_label(ps)} needs one NVLink island")
                _book(state, ps, chosen)
                out[ps].append((name, tuple(chosen)))
    else:
        whole = sum(ps.whole_gpus * count for ps, count in remaining.items())
        if whole > state.whole_free:
            raise AssignmentError(f"node {name}: {whole} whole GPUs placed, {state.whole_free} free")
        for ps, count in remaining.items():
            for _ in range(count):
                _book(state, ps, [])
                out[ps].append((name, None))
    # 3. Shares: on the partly used GPU the model chose, or on an untouched GPU per opened slot.
    opened = sum(value(t) for t in ctx.fresh_slots.get(n, []))
    untouched = sorted(state.fully_free_gpus(), key=lambda g: (_island_free(state, g), g))
    if opened > len(untouched) or (opened and not state.indices_known):
        raise AssignmentError(f"node {name}: shares opened {opened} GPUs, {len(untouched)} untouched")
    for ps, count in items:
        if not ps.is_share:
            if not ps.whole_gpus:
                for _ in range(count):
                    _book(state, ps, [])
                    out[ps].append((name, ()))
            continue
        placed = 0
        for gpu, var in ctx.share_vars.get((ps.index, n), []):
            for _ in range(value(var)):
                _book(state, ps, [gpu])
                out[ps].append((name, (gpu,)))
                placed += 1
        for j, var in enumerate(ctx.fresh_share_vars.get((ps.index, n), [])):
            for _ in range(value(var)):
                gpu = untouched[j]
                _book(state, ps, [gpu])
                out[ps].append((name, (gpu,)))
                placed += 1
        if placed != count:
            raise AssignmentError(f"node {name}: {_label(ps)} has {count} pods but {placed} shares")
    _check(state)
    return out


def _next_pod(remaining: dict[PodSetEntry, int], g: int) -> PodSetEntry | None:
    sized = [ps for ps, left in remaining.items() if ps.whole_gpus == g and left > 0]
    sized.sort(key=lambda ps: (not ps.pod_set.nvlink_required, ps.index))
    return sized[0] if sized else None


def _island_free(state: NodeState, gpu: int) -> int:
    for island in state.islands:
        if gpu in island:
            return sum(1 for g in island if state.is_fully_free(g))
    return 0


def _book(state: NodeState, ps: PodSetEntry, gpus: list[int]) -> None:
    state.take(ps.request, gpus)
    if not ps.is_share and ps.whole_gpus and not gpus:
        state.unknown += ps.whole_gpus


def _check(state: NodeState) -> None:
    problems = []
    if state.cpu < 0 or state.mem < 0 or state.pods < 0:
        problems.append("CPU, memory or pod slots over-committed")
    if any(v < 0 for v in state.gpu_milli) or any(v < 0 for v in state.gpu_mem):
        problems.append("a GPU over-committed")
    if any(v < 0 for v in state.ext.values()):
        problems.append("an extended resource over-committed")
    if state.unknown > len(state.fully_free_gpus()):
        problems.append("more whole GPUs than are free")
    if problems:
        raise AssignmentError(f"node {state.name}: " + "; ".join(problems))


def _label(ps: PodSetEntry) -> str:
    return f"{ps.workload.workload.key} podset {ps.pod_set.name}"
