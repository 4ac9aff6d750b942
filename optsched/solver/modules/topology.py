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
from optsched.solver.context import ObjectiveTerm, SolverContext, WorkloadEntry, any_of
from optsched.solver.modules.nvlink import TOPOLOGY_RANK


class RequiredTopology:
    name = "topology-required"
    phase = "admission"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        model = ctx.model
        for ps in ctx.pod_sets:
            level = ps.pod_set.required_topology
            if level is None or not ps.nodes:
                continue
            members: dict[tuple[str, ...] | None, list[int]] = {}
            for pos, n in enumerate(ps.nodes):
                members.setdefault(ctx.domain(n, ps.levels, level), []).append(pos)
            if len(members) < 2:
                continue
            chosen = []
            for index, positions in enumerate(members.values()):
                d = model.new_bool_var(f"req[{ps.index},{index}]")
                chosen.append(d)
                for pos in positions:
                    model.add(ps.y[pos] <= ps.ub[pos] * d)
                ys = [ps.y[pos] for pos in positions]
                ctx.derive(d, any_of(ys))
            model.add(sum(chosen, start=0) == ps.workload.admit)
        return []


class Topology:
    name = "topology"
    phase = "quality"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        settings = ctx.settings
        if not settings.modules.topology.enabled or settings.modules.topology.weight == 0:
            return []
        variables: list[cp_model.IntVar] = []
        coefs: list[int] = []
        for entry in ctx.workloads:
            if not ctx.is_active(entry) or sum(ps.pod_set.count for ps in entry.pod_sets) < 2:
                continue
            _spread(ctx, entry, variables, coefs)
        if not variables:
            return []
        weight = settings.modules.topology.weight
        expr = cp_model.LinearExpr.weighted_sum(variables, [c * weight for c in coefs])
        return [ObjectiveTerm("topology", TOPOLOGY_RANK, expr)]


def _spread(
    ctx: SolverContext, entry: WorkloadEntry, variables: list[cp_model.IntVar], coefs: list[int]
) -> None:
    model = ctx.model
    weights = ctx.settings.topology
    nodes = sorted({n for ps in entry.pod_sets for n in ps.nodes})
    if not nodes:
        return
    used = {n: model.new_bool_var(f"use[{entry.index},{n}]") for n in nodes}
    on: dict[int, list[cp_model.IntVar]] = {n: [] for n in nodes}
    for ps in entry.pod_sets:
        for pos, n in enumerate(ps.nodes):
            model.add(ps.y[pos] <= ps.ub[pos] * used[n])
            on[n].append(ps.y[pos])
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
            domain = ctx.domain(n, levels, level)
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
