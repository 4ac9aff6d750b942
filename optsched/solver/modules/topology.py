"""Inter-node topology: required levels are hard, and gangs span as few domains as possible.

A PodSet with a required level (Kueue ``podset-required-topology``) puts all
its pods in one domain of that level: a Boolean per candidate domain, exactly
one true when admitted (:class:`RequiredTopology`, applied with the admission
model -- it is the job's own demand and stays on when the preference is off).

The preference (:class:`Topology`, the topology stage): for every admitted
workload that has more than one pod, a Boolean per candidate node says "the
gang uses this node", and one per domain of every coarser level says "the gang
uses this domain". The stage minimises the weighted count: nodes, racks (every
level between the coarsest and the host) and blocks (the coarsest level),
with the PodSet's preferred or required level weighted up. Fewer domains is a
linear stand-in for more bandwidth between the pods.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.model.names import HOSTNAME_LABEL
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import any_of
from optsched.solver.objective import ObjectiveTerm, Phase, Stage
from optsched.solver.variables import Candidate, WorkloadVars

Priced = tuple[list[cp_model.IntVar], list[int]]
"""Variables and their costs, summed into the stage."""


class RequiredTopology:
    name = "topology-required"
    phase = Phase.ADMISSION
    switch: Switch | None = None
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        model = ctx.model
        for ps in ctx.vars.pod_sets:
            level = ps.pod_set.required_topology
            if level is None or not ps.candidates:
                continue
            members: dict[tuple[str, ...] | None, list[Candidate]] = {}
            for c in ps.candidates:
                members.setdefault(ctx.problem.domain(c.node, ps.levels, level), []).append(c)
            if len(members) < 2:
                continue
            chosen = []
            for index, inside in enumerate(members.values()):
                d = model.new_bool_var(f"req[{ps.index},{index}]")
                chosen.append(d)
                for c in inside:
                    model.add(c.y <= c.ub * d)
                ctx.derive(d, any_of([c.y for c in inside]))
            model.add(sum(chosen, start=0) == ps.admit)
        return []


class Topology:
    name = "topology"
    phase = Phase.QUALITY
    switch = Switch("topology")
    stages = (Stage.TOPOLOGY,)

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        priced: Priced = ([], [])
        for entry in ctx.vars.workloads:
            if not ctx.vars.is_active(entry) or sum(ps.pod_set.count for ps in entry.pod_sets) < 2:
                continue
            _spread(ctx, entry, priced)
        variables, coefs = priced
        if not variables:
            return []
        expr = cp_model.LinearExpr.weighted_sum(variables, [c * weight for c in coefs])
        return [ObjectiveTerm(Stage.TOPOLOGY, expr)]


def _spread(ctx: ModelContext, entry: WorkloadVars, priced: Priced) -> None:
    """Node and domain indicators of one gang, with their costs."""
    model = ctx.model
    variables, coefs = priced
    weights = ctx.settings.topology
    nodes = sorted({c.node for ps in entry.pod_sets for c in ps.candidates})
    if not nodes:
        return
    used = {n: model.new_bool_var(f"use[{entry.index},{n}]") for n in nodes}
    on: dict[int, list[cp_model.IntVar]] = {n: [] for n in nodes}
    for ps in entry.pod_sets:
        for c in ps.candidates:
            model.add(c.y <= c.ub * used[c.node])
            on[c.node].append(c.y)
    for n, var in used.items():
        ctx.derive(var, any_of(on[n]))
    for n in nodes:
        variables.append(used[n])
        coefs.append(weights.node)
    levels = entry.pod_sets[0].levels
    non_host = [level for level in levels if level != HOSTNAME_LABEL]
    preferred = {ps.pod_set.preferred_topology for ps in entry.pod_sets} | {
        ps.pod_set.required_topology for ps in entry.pod_sets
    }
    for depth, level in enumerate(non_host):
        base = weights.block if depth == 0 and len(non_host) > 1 else weights.rack
        if level in preferred:
            base *= weights.preferred_factor
        groups: dict[tuple[str, ...], list[int]] = {}
        for n in nodes:
            domain = ctx.problem.domain(n, levels, level)
            if domain is not None:
                groups.setdefault(domain, []).append(n)
        if len(groups) < 2 or base == 0:
            continue
        for index, members in enumerate(groups.values()):
            d = model.new_bool_var(f"dom[{entry.index},{depth},{index}]")
            for n in members:
                model.add_implication(used[n], d)
            ctx.derive(d, any_of([used[n] for n in members]))
            variables.append(d)
            coefs.append(base)
