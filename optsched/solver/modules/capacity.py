"""Node capacity: CPU, memory, pod slots, extended resources (MIG), whole GPUs and GPU shares.

Whole-GPU pods count against the node's whole free GPUs (index-unknown usage
already subtracted). Each share goes on one GPU: partly used GPUs get a count
variable per GPU index, and untouched GPUs are opened as interchangeable
"slots" (a Boolean each, ordered to break symmetry); an opened slot is no
longer a whole free GPU. Where in-use GPUs have unknown indices a slot holds
one share, whose GPU the node picks, and only single-share pods open slots (a
pod's N shares are then all on partly used GPUs of known index). Shares on one
GPU never exceed its free compute, free memory or free task slots (HAMi's split
count). A pod of N shares (HAMi's ``nvidia.com/gpu: N`` with
``gpumem``/``gpucores``) puts one share on each of N different GPUs: the
PodSet's shares on the node are N times its pods, and no GPU or slot holds more
of them than there are pods, which is exactly when the counts split into pods
(:func:`optsched.capacity.fit.spread_room`). Constraints that cannot bind
(every candidate at its upper bound still fits) are left out to keep large
models small.

The share variables go to :class:`~optsched.solver.variables.ShareVars`:
packing counts opened slots as used GPUs, and the GPU assignment reads which
GPU each share landed on.
"""

from __future__ import annotations

from functools import partial

from ortools.sat.python import cp_model

from optsched.capacity.fit import fresh_gpus, share_gpus, share_slots
from optsched.capacity.state import UNLIMITED_TASKS, NodeState
from optsched.model.names import MIG_PREFIX
from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import Candidate, PodSetVars

OnNode = list[tuple[PodSetVars, Candidate]]
ShareItems = list[tuple[PodSetVars, cp_model.IntVar]]


def _limit(model: cp_model.CpModel, terms: list[tuple[int, cp_model.IntVar, int]], free: int) -> None:
    """Add sum(coef * var) <= free unless it cannot bind (terms are (coef, var, ub))."""
    terms = [t for t in terms if t[0] > 0]
    if not terms or sum(c * ub for c, _, ub in terms) <= free:
        return
    model.add(cp_model.LinearExpr.weighted_sum([v for _, v, _ in terms], [c for c, _, _ in terms]) <= free)


class Capacity:
    name = "capacity"
    phase = Phase.ADMISSION
    switch: Switch | None = None
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        for n, entries in ctx.vars.by_node.items():
            node = ctx.nodes[n]
            _limit(model, [(e.request.cpu_milli, c.y, c.ub) for e, c in entries], node.cpu)
            _limit(model, [(e.request.memory_mib, c.y, c.ub) for e, c in entries], node.mem)
            _limit(model, [(1, c.y, c.ub) for _, c in entries], node.pods)
            names = {name for e, _ in entries for name in e.request.extended}
            if n in ctx.problem.mig_headroom:
                # The layout module counts MIG requests here against the layouts it chooses.
                names = {name for name in names if not name.startswith(MIG_PREFIX)}
            for name in sorted(names):
                _limit(
                    model,
                    [(e.request.extended.get(name, 0), c.y, c.ub) for e, c in entries],
                    node.ext.get(name, 0),
                )
            shares = [(e, c) for e, c in entries if e.is_share]
            touched = _shares(ctx, n, shares) if shares else []
            whole = [(e.whole_gpus, c.y, c.ub) for e, c in entries if e.whole_gpus]
            whole += [(1, t, 1) for t in touched]
            _limit(model, whole, node.whole_free)
        return []


def _shares(ctx: ModelContext, n: int, shares: OnNode) -> list[cp_model.IntVar]:
    """Share variables of one node; returns the untouched-GPU slots they may open."""
    model = ctx.model
    node = ctx.nodes[n]
    partly = share_gpus(node)
    # A PodSet has one candidate per flavor that accepts the node; its shares are placed once.
    by_pod_set: dict[PodSetVars, list[Candidate]] = {}
    for e, c in shares:
        by_pod_set.setdefault(e, []).append(c)
    slots = min(fresh_gpus(node), sum(cs[0].ub * e.request.gpus for e, cs in by_pod_set.items()))
    touched = [model.new_bool_var(f"open[{n},{j}]") for j in range(slots)]
    for j in range(1, slots):
        model.add_implication(touched[j], touched[j - 1])
    per_gpu: dict[int, ShareItems] = {g: [] for g in partly}
    per_slot: list[ShareItems] = [[] for _ in range(slots)]
    for e, cs in by_pod_set.items():
        req, ub = e.request, cs[0].ub
        parts: list[cp_model.IntVar] = []
        on_gpu: list[tuple[int, cp_model.IntVar]] = []
        for g in partly:
            room = min(share_slots(node, req, g), ub)
            if room > 0:
                var = model.new_int_var(0, room, f"s[{e.index},{n},{g}]")
                per_gpu[g].append((e, var))
                on_gpu.append((g, var))
                parts.append(var)
        fresh: list[cp_model.IntVar] = []
        room = min(share_slots(node, req, None), ub) if node.indices_known or req.gpus == 1 else 0
        for j in range(slots if room > 0 else 0):
            var = model.new_int_var(0, room, f"f[{e.index},{n},{j}]")
            model.add(var <= room * touched[j])
            per_slot[j].append((e, var))
            fresh.append(var)
            parts.append(var)
        placed = cs[0].y if len(cs) == 1 else sum((c.y for c in cs), start=0)
        model.add(req.gpus * placed == sum(parts, start=0))
        if req.gpus > 1:
            for var in parts:
                model.add(var <= placed)
        ctx.vars.shares.add_pod_set(e.index, n, on_gpu, fresh)
    for g, items in per_gpu.items():
        _gpu_limits(model, node, items, (node.gpu_milli[g], node.gpu_mem[g], node.gpu_tasks[g]), None)
    for j, items in enumerate(per_slot):
        free = (FULL_GPU_MILLI, node.gpu_mem_total, node.tasks_total)
        _gpu_limits(model, node, items, free, touched[j])
        if items and not node.indices_known:
            # The node picks each such share's GPU: one share per opened slot.
            model.add(sum((v for _, v in items), start=0) <= touched[j])
    ctx.vars.shares.add_slots(n, touched)
    _hints(ctx, n, [(e, cs[0]) for e, cs in by_pod_set.items()], touched)
    return touched


def _opened(node: NodeState, n: int, shares: OnNode, h: HintView) -> list[int]:
    """Slots the known solution's shares open on node ``n``, in slot order.

    The untouched GPUs they use, ascending; where in-use GPUs have unknown
    indices, the PodSet of each share left to the node (one slot each).
    """
    if not node.indices_known:
        return [e.index for e, _ in shares for gpus in h.gpus.get((e.index, n), []) if not gpus]
    return sorted(
        {g for e, _ in shares for gpus in h.gpus.get((e.index, n), []) for g in gpus if node.is_fully_free(g)}
    )


def _hints(ctx: ModelContext, n: int, shares: OnNode, touched: list[cp_model.IntVar]) -> None:
    """Share variables from the greedy plan's GPU indices (or from counts, first fit)."""
    node = ctx.nodes[n]

    def slot_open(h: HintView, j: int) -> int:
        return int(j < len(_opened(node, n, shares, h)))

    def on_gpu(h: HintView, e: PodSetVars, g: int) -> int:
        return sum(1 for gpus in h.gpus.get((e.index, n), []) if g in gpus)

    def on_slot(h: HintView, e: PodSetVars, j: int) -> int:
        slots = _opened(node, n, shares, h)
        if j >= len(slots):
            return 0
        if not node.indices_known:
            return int(slots[j] == e.index)
        return sum(1 for gpus in h.gpus.get((e.index, n), []) if slots[j] in gpus)

    for j, var in enumerate(touched):
        ctx.derive(var, partial(slot_open, j=j))
    for e, _ in shares:
        for g, var in ctx.vars.shares.on_gpu(e.index, n):
            ctx.derive(var, partial(on_gpu, e=e, g=g))
        for j, var in enumerate(ctx.vars.shares.fresh(e.index, n)):
            ctx.derive(var, partial(on_slot, e=e, j=j))


def _gpu_limits(
    model: cp_model.CpModel,
    node: NodeState,
    items: ShareItems,
    free: tuple[int, int, int],
    opened: cp_model.IntVar | None,
) -> None:
    """Shares on one GPU within its free compute, memory and tasks (an unopened slot holds none)."""
    if not items:
        return
    variables = [v for _, v in items]
    compute = cp_model.LinearExpr.weighted_sum(variables, [e.request.gpu_milli for e, _ in items])
    memory = cp_model.LinearExpr.weighted_sum(variables, [node.share_mem(e.request) for e, _ in items])
    milli, mem, tasks = free
    limits = [(compute, milli), (memory, mem)]
    if tasks < UNLIMITED_TASKS:
        limits.append((cp_model.LinearExpr.sum(variables), tasks))
    for used, room in limits:
        model.add(used <= (room if opened is None else room * opened))
