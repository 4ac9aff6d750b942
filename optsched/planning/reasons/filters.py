"""Reasons that do not depend on what is free: no node passes the filters, or the gang can never fit."""

from __future__ import annotations

from optsched.capacity.eligibility import Candidates
from optsched.capacity.state import NodeState
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import PodSet, Snapshot
from optsched.planning.reasons.binding import binding, limits
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
from optsched.planning.reasons.shortfall import Shortfall, shortfall_reason
from optsched.planning.reasons.too_large import too_large


def no_node(snapshot: Snapshot, ps: PodSet, cands: list[Candidates]) -> Reason:
    """Why no node is eligible: a pod bigger than any node, or the filters that rule the nodes out."""
    larger = too_large(snapshot, ps, cands)
    if larger is not None:
        return larger
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
    best: tuple[float, int, str, list[NodeState]] | None = None
    for label, nodes in groups:
        members = domains(nodes, ps.required_topology, levels).values() if ps.required_topology else [nodes]
        for group in members:
            states = [memo.empty_state(n) for n in group]
            pods = sum(fits(s, ps, ps.needed) for s in states)
            if pods >= ps.needed:
                return None
            free = free_gpus(states, ps)
            if best is None or (free, pods) >= best[:2]:
                best = (free, pods, label, states)
    if best is None:
        return _no_domain(ps, demand(ps, groups[0][0] if len(groups) == 1 else ""))
    free, pods, label, states = best
    found = limits(ps, states)
    shortfall = Shortfall(
        pods=pods,
        free=free,
        per_node=max((s.whole_free for s in states), default=0),
        limit=binding(found, ps.needed),
        asked=tuple(limit.words for limit in found),
    )
    product = label if len(groups) == 1 else ""
    return shortfall_reason(ps, demand(ps, product), shortfall, permanent=True)


def _no_domain(ps: PodSet, what: str) -> Reason:
    """A required topology level none of the eligible nodes is labelled with."""
    level = ps.required_topology
    needed, unit = demand_figures(ps)
    return Reason(
        code=ReasonCode.TOPOLOGY_UNSATISFIABLE,
        message=f"pod set {ps.name}: needs {what} in one {level}; no eligible node has the label "
        f"{level}, so it can never fit",
        pod_set=ps.name,
        needed=needed,
        available=0,
        unit=unit,
        scope=level,
        permanent=True,
    )
