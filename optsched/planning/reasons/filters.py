"""Reasons that do not depend on what is free: no node passes the filters, or the gang can never fit."""

from __future__ import annotations

from optsched.capacity.eligibility import Candidates
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import PodSet, Snapshot
from optsched.planning.reasons.context import Memo
from optsched.planning.reasons.shared import (
    demand,
    demand_figures,
    domains,
    fits,
    free_gpus,
    levels_for,
    scopes,
)


def no_node(snapshot: Snapshot, ps: PodSet, cands: list[Candidates]) -> Reason:
    """Why no node is eligible: a pod bigger than any node, or the filters that rule the nodes out."""
    req = ps.request
    healthy = [len(n.healthy_gpus) for n in snapshot.nodes if n.ready and not n.unschedulable]
    if req.gpus and healthy and req.gpus > max(healthy):
        return Reason(
            code=ReasonCode.POD_TOO_LARGE,
            message=f"pod set {ps.name}: pod needs {req.gpus} GPUs; the largest node has {max(healthy)}",
            pod_set=ps.name,
            needed=req.gpus,
            available=max(healthy),
            unit="GPUs",
            scope="node",
            permanent=True,
        )
    if not any(cand.excluded for cand in cands):
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"pod set {ps.name}: no node in the cluster",
            pod_set=ps.name,
        )
    named = [(c.flavor.name, c) for c in cands if c.flavor is not None]
    if len(named) <= 1 or all(c.excluded == cands[0].excluded for c in cands):
        flavors = [name for name, _ in named]
        where = f" in any flavor ({', '.join(flavors)})" if len(flavors) > 1 else ""
        return Reason(
            code=ReasonCode.NO_MATCHING_NODE,
            message=f"pod set {ps.name}: no node matches{where}: " + _counts(cands[0].excluded),
            pod_set=ps.name,
            excluded=dict(cands[0].excluded),
        )
    per_flavor = "; ".join(f"flavor {name}: {_counts(c.excluded)}" for name, c in named)
    return Reason(
        code=ReasonCode.NO_MATCHING_NODE,
        message=f"pod set {ps.name}: no node matches in any flavor: " + per_flavor,
        pod_set=ps.name,
    )


def _counts(excluded: dict[str, int]) -> str:
    ranked = sorted(excluded.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{count} fail {why}" for why, count in ranked)


def never_fits(snapshot: Snapshot, ps: PodSet, cands: list[Candidates], memo: Memo) -> Reason | None:
    """A reason if the gang could not fit even on an empty cluster, else None."""
    groups = scopes(ps, cands)
    levels = levels_for(snapshot, cands)
    best_total = 0.0
    best_label = ""
    for label, nodes in groups:
        members = domains(nodes, ps.required_topology, levels).values() if ps.required_topology else [nodes]
        for group in members:
            states = [memo.empty_state(n) for n in group]
            if sum(fits(s, ps, ps.needed) for s in states) >= ps.needed:
                return None
            if free_gpus(states, ps) >= best_total:
                best_total, best_label = free_gpus(states, ps), label
    product = best_label if len(groups) == 1 else ""
    needed, unit = demand_figures(ps)
    figures = {"pod_set": ps.name, "needed": needed, "unit": unit, "permanent": True}
    if ps.request.gpus:
        figures["available"] = best_total
    if ps.required_topology:
        return Reason(
            code=ReasonCode.TOPOLOGY_UNSATISFIABLE,
            message=f"pod set {ps.name}: needs {demand(ps, product)} in one {ps.required_topology}; "
            f"the largest such domain has {best_total:g} usable GPUs, so it can never fit",
            scope=ps.required_topology,
            **figures,
        )
    return Reason(
        code=ReasonCode.INSUFFICIENT_CAPACITY,
        message=f"pod set {ps.name}: needs {demand(ps, product)}; the eligible nodes have "
        f"{best_total:g} GPUs in total, so it can never fit",
        scope="eligible nodes",
        **figures,
    )
