"""MIG packing and fragmentation: idle GPUs opened, then free memory slices the queue's profiles cannot use.

New instances go on GPUs that pods already use before any idle GPU gets one:
an idle GPU stays whole for the largest profiles (a 7g needs all of it), and
the pool keeps fewer GPUs busy. Among layouts that open as many, the stage
minimises fragmentation.

In the spirit of FGD: a free memory slice (in no instance) is wasted for a
profile when no placement of that profile fits in the free slices around it
(two 1g instances at slices 0 and 4 leave six slices free and no room for a
3g, 4g or 7g). The measure weighs each profile by how often the cluster asks
for it: the pending pods' requests plus the instances running pods hold. It
is minimised after the reconfiguration stage, so among layouts that admit
the same work with as few changes it keeps free space in the shapes wanted
most. Slices of existing instances no pod uses are not counted: they are
capacity of their own profile.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from ortools.sat.python import cp_model

from optsched.mig.layout import resource_name
from optsched.mig.profiles import MigProfile
from optsched.model.names import MIG_PREFIX
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintView, any_of
from optsched.solver.mig_vars import MigGpuVars
from optsched.solver.objective import ObjectiveTerm, Phase, Stage

WEIGHT_SCALE = 100
"""A profile's weight is its share of the demand in percent (at least 1 where it is asked at all)."""


class MigFragmentation:
    name = "mig-fragmentation"
    phase = Phase.QUALITY
    switch: Switch | None = Switch("mig")
    stages: tuple[Stage, ...] = (Stage.MIG_FRAGMENTATION,)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        gpus = ctx.vars.mig.gpus
        if not gpus:
            return []
        demand = _demand(ctx)
        total = sum(demand.values())
        if not total:
            return []
        shares = {name: max(1, round(WEIGHT_SCALE * count / total)) for name, count in demand.items()}
        parts: list[cp_model.LinearExprT] = []
        most = 0
        for g in gpus:
            for profile in g.model.profiles:
                share = shares.get(resource_name(profile.name), 0)
                if share:
                    parts.append(share * _wasted(ctx, g, profile))
                    most += share * g.model.memory_slices
        opened = _opened(ctx, gpus)
        if not parts and not opened:
            return []
        # Opening an idle GPU costs more than any fragmentation: the stage is lexicographic inside.
        expr = cp_model.LinearExpr.sum([(most + 1) * cp_model.LinearExpr.sum(opened), *parts])
        return [ObjectiveTerm(Stage.MIG_FRAGMENTATION, weight * expr, scale=WEIGHT_SCALE * weight)]


def _opened(ctx: ModelContext, gpus: list[MigGpuVars]) -> list[cp_model.IntVar]:
    """Per GPU no pod uses: 1 when the plan creates an instance on it (pods would then use it)."""
    out = []
    for g in gpus:
        if g.gpu.in_use:
            continue
        new = [p.var for p in g.placements if not p.current]
        if not new:
            continue
        opened = ctx.model.new_bool_var(f"mig-opened[{g.node},{g.gpu.index}]")
        for var in new:
            ctx.model.add_implication(var, opened)
        ctx.derive(opened, any_of(new))
        out.append(opened)
    return out


def _demand(ctx: ModelContext) -> Counter[str]:
    """Instances asked per MIG resource: pending pods in the model plus instances pods hold."""
    demand: Counter[str] = Counter()
    for ps in ctx.vars.pod_sets:
        for name, amount in ps.request.extended.items():
            if name.startswith(MIG_PREFIX):
                demand[name] += amount * ps.pod_set.count
    for node in ctx.snapshot.nodes:
        for gpu in node.mig_gpus:
            demand.update(resource_name(i.profile) for i in gpu.in_use)
    return demand


def _wasted(ctx: ModelContext, g: MigGpuVars, profile: MigProfile) -> cp_model.LinearExprT:
    """Free memory slices of ``g`` that no free placement of ``profile`` covers."""
    model_ = ctx.model
    slices = range(g.model.memory_slices)
    covering = {m: [p.var for p in g.placements if p.covers(m)] for m in slices}
    free = {m: 1 - cp_model.LinearExpr.sum(covering[m]) for m in slices}
    windows = {}
    for start in profile.starts:
        span = range(start, start + profile.memory_slices)
        fits = model_.new_bool_var(f"mig-open[{g.node},{g.gpu.index},{profile.name}@{start}]")
        for m in span:
            model_.add(fits <= free[m])
        ctx.derive(fits, partial(_all_free, vars_=[v for m in span for v in covering[m]]))
        windows[start] = (span, fits)
    usable = []
    for m in slices:
        opened = [fits for span, fits in windows.values() if m in span]
        if not opened:
            continue
        use = model_.new_bool_var(f"mig-usable[{g.node},{g.gpu.index},{profile.name},{m}]")
        model_.add(use <= cp_model.LinearExpr.sum(opened))
        ctx.derive(
            use,
            partial(_any_open, spans=[(list(span), covering) for span, _ in windows.values() if m in span]),
        )
        usable.append(use)
    return cp_model.LinearExpr.sum([free[m] for m in slices]) - cp_model.LinearExpr.sum(usable)


def _all_free(h: HintView, *, vars_: list[cp_model.IntVar]) -> int:
    return int(not any(h(v) for v in vars_))


def _any_open(h: HintView, *, spans: list[tuple[list[int], dict[int, list[cp_model.IntVar]]]]) -> int:
    return int(any(not any(h(v) for m in span for v in covering[m]) for span, covering in spans))
