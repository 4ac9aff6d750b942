"""MIG layouts chosen with the placement: the instances each changeable GPU gets, and their capacity.

On a node a new layout could serve (:attr:`Problem.mig_headroom`) every GPU it
may change gets one Boolean per ``(profile, start)`` placement of the
profiles the queue asks for there and of those the GPU has; the placement
rules of its model hold exactly as the hardware applies them (no two
instances share a memory slice, the compute slices and each profile's
instance limit are not exceeded, starts are the model's), and every instance
a pod holds stays where it is. The pods' ``nvidia.com/mig-<profile>``
requests then count against the instances there now plus those the chosen
layouts add (minus those they remove). Other nodes keep their instances and
the capacity module counts them.

The module prices the change itself, in the reconfiguration stage right
after admission: the GPUs whose layout differs from their current one (a
change restarts the node's device plugin and DCGM, and its instances must be
idle), then the instances created (a changed GPU gets what the queue needs,
not every instance that fits). The hint is the current layout, so the greedy placement stays a
complete solution.
"""

from __future__ import annotations

from functools import partial

from ortools.sat.python import cp_model

from optsched.capacity.mig_room import plannable
from optsched.mig.layout import resource_name
from optsched.mig.profiles import MigModel
from optsched.mig.room import model_named
from optsched.model.mig import MigGpu
from optsched.model.names import MIG_PREFIX
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintView
from optsched.solver.mig_vars import MigGpuVars, MigPlacementVar
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import Candidate, PodSetVars

OnNode = list[tuple[PodSetVars, Candidate]]


class MigLayouts:
    """Choose each changeable MIG GPU's layout; hold MIG requests to the instances it offers."""

    name = "mig-layouts"
    phase = Phase.ADMISSION
    switch: Switch | None = None
    stages: tuple[Stage, ...] = ()
    """None of its own: without it MIG requests on these nodes would have no capacity limit."""

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        changed: list[cp_model.IntVar] = []
        for n in sorted(ctx.problem.mig_headroom):
            entries = ctx.vars.on_node(n)
            requested = sorted(
                {k for e, _ in entries for k in e.request.extended if k.startswith(MIG_PREFIX)}
            )
            if not requested:
                continue
            gpus = [_gpu_vars(ctx, n, gpu, requested) for gpu in plannable(ctx.node(n))]
            ctx.vars.mig.gpus.extend(gpus)
            # Profiles running pods hold too: a new layout keeps as many instances as they use, even
            # where the agent has not yet marked which ones are in use.
            running = ctx.snapshot.usage_of(ctx.node(n).name).extended
            held = [k for k, v in running.items() if k.startswith(MIG_PREFIX) and v > 0]
            _capacity(ctx, n, entries, sorted({*requested, *held}), gpus)
            changed.extend(g.changed for g in gpus)
        if not changed or weight == 0:
            return []
        # Then the fewest new instances: a changed GPU gets what the queue needs, not every
        # instance that would fit (an idle instance fixes the shape of its slices).
        created = [p.var for g in ctx.vars.mig.gpus for p in g.placements if not p.current]
        per_change = len(created) + 1
        expr = per_change * cp_model.LinearExpr.sum(changed) + cp_model.LinearExpr.sum(created)
        return [ObjectiveTerm(Stage.MIG_RECONFIGURATION, weight * expr, scale=per_change * weight)]


def _gpu_vars(ctx: ModelContext, n: int, gpu: MigGpu, requested: list[str]) -> MigGpuVars:
    """One GPU's placement Booleans with its model's rules, its in-use instances fixed, hinted as it is."""
    model = model_named(gpu.model)
    assert model is not None  # plannable() keeps GPUs of a known model only
    model_ = ctx.model
    current = set(gpu.layout)
    in_use = {(i.profile, i.start) for i in gpu.in_use}
    wanted = {p.name for p in model.profiles if resource_name(p.name) in requested} | {p for p, _ in current}
    placements = []
    for profile in model.profiles:
        if profile.name not in wanted:
            continue
        for start in profile.starts:
            var = model_.new_bool_var(f"mig[{n},{gpu.index},{profile.name}@{start}]")
            here = (profile.name, start) in current
            if (profile.name, start) in in_use:
                model_.add(var == 1)
            ctx.derive(var, partial(_constant, value=int(here)))
            placements.append(MigPlacementVar(profile.name, start, profile.memory_slices, var, here))
    _rules(model_, model, placements)
    changed = model_.new_bool_var(f"mig-changed[{n},{gpu.index}]")
    for p in placements:
        model_.add(changed >= (1 - p.var if p.current else p.var))
    ctx.derive(changed, partial(_constant, value=0))
    return MigGpuVars(n, gpu, model, tuple(placements), changed)


def _rules(model_: cp_model.CpModel, model: MigModel, placements: list[MigPlacementVar]) -> None:
    """NVML's rules: one instance per memory slice, the compute slices, each profile's instance cap."""
    for memory_slice in range(model.memory_slices):
        covering = [p.var for p in placements if p.covers(memory_slice)]
        if len(covering) > 1:
            model_.add(cp_model.LinearExpr.sum(covering) <= 1)
    compute = {p.name: p.compute for p in model.profiles}
    model_.add(
        cp_model.LinearExpr.weighted_sum(
            [p.var for p in placements], [compute[p.profile] for p in placements]
        )
        <= model.compute_slices
    )
    for profile in model.profiles:
        own = [p.var for p in placements if p.profile == profile.name]
        if len(own) > profile.max_instances:
            model_.add(cp_model.LinearExpr.sum(own) <= profile.max_instances)


def _capacity(ctx: ModelContext, n: int, entries: OnNode, names: list[str], gpus: list[MigGpuVars]) -> None:
    """Per MIG resource: the pods' requests within the free instances now plus what the layouts change."""
    room = ctx.problem.mig_headroom[n]
    for name in names:
        # Pods holding more than the node advertises (its allocatable lags a change) leave none free.
        free_now = max(0, ctx.nodes[n].ext.get(name, 0) - room.get(name, 0))
        delta: list[cp_model.LinearExprT] = []
        for g in gpus:
            own = [p for p in g.placements if resource_name(p.profile) == name]
            delta.extend(p.var for p in own)
            free_now -= sum(1 for p in own if p.current)
        demand = [
            (e.request.extended.get(name, 0), c.y) for e, c in entries if e.request.extended.get(name, 0)
        ]
        used = cp_model.LinearExpr.weighted_sum([v for _, v in demand], [a for a, _ in demand])
        if demand or delta:
            ctx.model.add(used <= free_now + cp_model.LinearExpr.sum(delta))


def _constant(_: HintView, *, value: int) -> int:
    return value
