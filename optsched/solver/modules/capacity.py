"""Node capacity: CPU, memory, pod slots, extended resources (MIG), whole GPUs and GPU shares.

Whole-GPU pods count against the node's whole free GPUs (index-unknown usage
already subtracted). A share goes on one GPU: partly used GPUs get a count
variable per GPU index, and untouched GPUs are opened as interchangeable
"slots" (a Boolean each, ordered to break symmetry); an opened slot is no
longer a whole free GPU. Shares on one GPU never exceed its free compute or
free memory. Constraints that cannot bind (every candidate at its upper bound
still fits) are left out to keep large models small.
"""

from __future__ import annotations

from functools import partial

from ortools.sat.python import cp_model

from optsched.capacity.fit import fresh_gpus, share_gpus, share_slots
from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.solver.context import HintView, ObjectiveTerm, PodSetEntry, SolverContext


def _limit(model: cp_model.CpModel, terms: list[tuple[int, cp_model.IntVar, int]], free: int) -> None:
    """Add sum(coef * var) <= free unless it cannot bind (terms are (coef, var, ub))."""
    terms = [t for t in terms if t[0] > 0]
    if not terms or sum(c * ub for c, _, ub in terms) <= free:
        return
    model.add(cp_model.LinearExpr.weighted_sum([v for _, v, _ in terms], [c for c, _, _ in terms]) <= free)


class Capacity:
    phase = "admission"
    name = "capacity"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        model = ctx.model
        for n, entries in ctx.by_node.items():
            node = ctx.nodes[n]
            _limit(model, [(e.request.cpu_milli, e.y[p], e.ub[p]) for e, p in entries], node.cpu)
            _limit(model, [(e.request.memory_mib, e.y[p], e.ub[p]) for e, p in entries], node.mem)
            _limit(model, [(1, e.y[p], e.ub[p]) for e, p in entries], node.pods)
            names = {name for e, _ in entries for name in e.request.extended}
            for name in sorted(names):
                _limit(
                    model,
                    [(e.request.extended.get(name, 0), e.y[p], e.ub[p]) for e, p in entries],
                    node.ext.get(name, 0),
                )
            shares = [(e, p) for e, p in entries if e.is_share]
            touched = self._shares(ctx, n, shares) if shares else []
            whole = [(e.whole_gpus, e.y[p], e.ub[p]) for e, p in entries if e.whole_gpus]
            whole += [(1, t, 1) for t in touched]
            _limit(model, whole, node.whole_free)
        return []

    def _shares(
        self, ctx: SolverContext, n: int, shares: list[tuple[PodSetEntry, int]]
    ) -> list[cp_model.IntVar]:
        model = ctx.model
        node = ctx.nodes[n]
        partly = share_gpus(node)
        demand = sum(e.ub[p] for e, p in shares)
        slots = min(fresh_gpus(node), demand)
        touched = [model.new_bool_var(f"open[{n},{j}]") for j in range(slots)]
        for j in range(1, slots):
            model.add_implication(touched[j], touched[j - 1])
        per_gpu: dict[int, list[tuple[PodSetEntry, cp_model.IntVar]]] = {g: [] for g in partly}
        per_slot: list[list[tuple[PodSetEntry, cp_model.IntVar]]] = [[] for _ in range(slots)]
        for e, p in shares:
            req = e.request
            parts: list[cp_model.IntVar] = []
            on_gpu: list[tuple[int, cp_model.IntVar]] = []
            for g in partly:
                room = min(share_slots(node, req, g), e.ub[p])
                if room > 0:
                    var = model.new_int_var(0, room, f"s[{e.index},{n},{g}]")
                    per_gpu[g].append((e, var))
                    on_gpu.append((g, var))
                    parts.append(var)
            fresh: list[cp_model.IntVar] = []
            room = min(share_slots(node, req, None), e.ub[p])
            for j in range(slots if room > 0 else 0):
                var = model.new_int_var(0, room, f"f[{e.index},{n},{j}]")
                model.add(var <= room * touched[j])
                per_slot[j].append((e, var))
                fresh.append(var)
                parts.append(var)
            model.add(e.y[p] == sum(parts, start=0))
            ctx.share_vars[(e.index, n)] = on_gpu
            ctx.fresh_share_vars[(e.index, n)] = fresh
        for g, items in per_gpu.items():
            self._gpu_limits(model, items, node.gpu_milli[g], node.gpu_mem[g], None)
        for j, items in enumerate(per_slot):
            self._gpu_limits(model, items, FULL_GPU_MILLI, node.gpu_mem_total, touched[j])
        ctx.fresh_slots[n] = touched
        self._hints(ctx, n, shares, touched)
        return touched

    @staticmethod
    def _hints(
        ctx: SolverContext, n: int, shares: list[tuple[PodSetEntry, int]], touched: list[cp_model.IntVar]
    ) -> None:
        """Share variables from the greedy plan's GPU indices (or from counts, first fit)."""
        node = ctx.nodes[n]

        def opened(h: HintView) -> list[int]:
            fresh = {
                g
                for e, _ in shares
                for gpus in h.gpus.get((e.index, n), [])
                for g in gpus
                if node.is_fully_free(g)
            }
            return sorted(fresh)

        def slot_open(h: HintView, j: int) -> int:
            return int(j < len(opened(h)))

        def on_gpu(h: HintView, e: PodSetEntry, g: int) -> int:
            return sum(1 for gpus in h.gpus.get((e.index, n), []) if gpus == (g,))

        for j, var in enumerate(touched):
            ctx.derive(var, partial(slot_open, j=j))
        for e, _ in shares:
            for g, var in ctx.share_vars.get((e.index, n), []):
                ctx.derive(var, partial(on_gpu, e=e, g=g))
            for j, var in enumerate(ctx.fresh_share_vars.get((e.index, n), [])):

                def fresh_hint(h: HintView, e: PodSetEntry = e, j: int = j) -> int:
                    slots = opened(h)
                    if j >= len(slots):
                        return 0
                    return sum(1 for gpus in h.gpus.get((e.index, n), []) if gpus == (slots[j],))

                ctx.derive(var, fresh_hint)

    @staticmethod
    def _gpu_limits(
        model: cp_model.CpModel,
        items: list[tuple[PodSetEntry, cp_model.IntVar]],
        milli: int,
        mem: int,
        opened: cp_model.IntVar | None,
    ) -> None:
        if not items:
            return
        variables = [v for _, v in items]
        compute = cp_model.LinearExpr.weighted_sum(variables, [e.request.gpu_milli for e, _ in items])
        memory = cp_model.LinearExpr.weighted_sum(variables, [e.request.gpu_mem_mib for e, _ in items])
        if opened is None:
            model.add(compute <= milli)
            model.add(memory <= mem)
        else:
            model.add(compute <= milli * opened)
            model.add(memory <= mem * opened)
