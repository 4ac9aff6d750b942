"""Why a workload waits, in words its owner understands.

A deferral reason names the blocking constraint and by how much: a node
filter no node passes, a gang larger than any topology domain, a quota that
is used up, or free capacity that is too small or too scattered after the
plan's admissions (and whose admissions took it). Every reason is re-derived
from the snapshot and the free capacity left after the plan, so the solver and
the greedy baselines get the same explanations.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from optsched.capacity.eligibility import CandidateCache, Candidates
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.state import ClusterState, NodeState
from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, quota_of, scaled
from optsched.model.snapshot import FULL_GPU_MILLI, Node, PodSet, Snapshot, Workload
from optsched.topology.domains import domain_of

MAX_NAMES = 3
BEYOND_WINDOW = "beyond the planning window"
_T = TypeVar("_T")


def shape_key(ps: PodSet, cands: list[Candidates]) -> Hashable:
    """Everything a capacity answer for ``ps`` depends on besides the free state."""
    req = ps.request
    return (
        id(cands),
        ps.needed,
        ps.required_topology,
        ps.allow_mixed_products,
        ps.nvlink_required,
        (
            req.cpu_milli,
            req.memory_mib,
            req.gpus,
            req.gpu_milli,
            req.gpu_mem_mib,
            tuple(sorted(req.extended.items())),
        ),
    )


@dataclass
class PlanContext:
    """What the plan did, for attributing capacity and quota to the work that took it."""

    state_before: ClusterState | None = None
    ledger_after: QuotaLedger | None = None
    """Quota usage after the plan's admissions (None: the snapshot's usage)."""
    admitted: list[tuple[Workload, frozenset[str]]] = field(default_factory=list)
    """Admitted workloads and the nodes their pods use."""
    admitted_flavors: dict[str, frozenset[str]] = field(default_factory=dict)
    """Workload key -> ResourceFlavors its admitted pods use (for quota attribution)."""
    cache: CandidateCache | None = None


def explain_deferral(
    snapshot: Snapshot,
    workload: Workload,
    state_after: ClusterState,
    *,
    context: PlanContext | None = None,
) -> list[str]:
    """Plain-words reasons why ``workload`` is not admitted by a plan that leaves ``state_after`` free."""
    context = context or PlanContext()
    if context.cache is None or context.cache.snapshot is not snapshot:
        context.cache = CandidateCache(snapshot)
    cache = context.cache
    if not workload.pod_sets:
        return ["workload has no pod sets"]
    cq = snapshot.cluster_queue_of(workload)
    if cq is None and workload.queue_name and snapshot.cluster_queues:
        return [
            f"LocalQueue {workload.namespace}/{workload.queue_name} does not lead to a known ClusterQueue"
        ]
    per_pod_set = [(ps, cache.get(workload, ps)) for ps in workload.pod_sets]
    for ps, cands in per_pod_set:
        if not any(c.nodes for c in cands):
            return [_no_node_reason(snapshot, ps, cands)]
    for ps, cands in per_pod_set:
        never = cache.remember(
            ("never", shape_key(ps, cands)), partial(_never_fits, snapshot, ps, cands, cache)
        )
        if never:
            return [never]
    reasons: list[str] = []
    quota = _quota_reason(snapshot, workload, per_pod_set, context)
    if quota:
        reasons.append(quota)
    capacity = _capacity_reasons(snapshot, workload, per_pod_set, state_after, context)
    reasons.extend(capacity)
    if not reasons:
        reasons.append(
            "fits the capacity and quota left after this plan, but the policy did not admit it "
            "(another choice of nodes for earlier work, or the time limit)"
        )
    return reasons


# -- static filters ------------------------------------------------------------------------------


def _no_node_reason(snapshot: Snapshot, ps: PodSet, cands: list[Candidates]) -> str:
    req = ps.request
    healthy = [len(n.healthy_gpus) for n in snapshot.nodes if n.ready and not n.unschedulable]
    if req.gpus and healthy and req.gpus > max(healthy):
        return f"pod set {ps.name}: pod needs {req.gpus} GPUs; the largest node has {max(healthy)}"
    if not any(cand.excluded for cand in cands):
        return f"pod set {ps.name}: no node in the cluster"

    def counts(excluded: dict[str, int]) -> str:
        ranked = sorted(excluded.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{count} fail {why}" for why, count in ranked)

    named = [(c.flavor.name, c) for c in cands if c.flavor is not None]
    if len(named) <= 1 or all(c.excluded == cands[0].excluded for c in cands):
        flavors = [name for name, _ in named]
        where = f" in any flavor ({', '.join(flavors)})" if len(flavors) > 1 else ""
        return f"pod set {ps.name}: no node matches{where}: " + counts(cands[0].excluded)
    per_flavor = "; ".join(f"flavor {name}: {counts(c.excluded)}" for name, c in named)
    return f"pod set {ps.name}: no node matches in any flavor: " + per_flavor


def _scopes(snapshot: Snapshot, ps: PodSet, cands: list[Candidates]) -> list[tuple[str, list[Node]]]:
    """Node groups the pod set may use as one gang: per flavor, and per GPU product unless mixing."""
    out: list[tuple[str, list[Node]]] = []
    for cand in cands:
        nodes = list(cand.nodes)
        if not nodes:
            continue
        if ps.request.gpus and not ps.allow_mixed_products:
            products = sorted({n.product for n in nodes})
            for product in products:
                out.append((product, [n for n in nodes if n.product == product]))
        else:
            label = ",".join(sorted({n.product for n in nodes if n.product}))
            out.append((label, nodes))
    return out


def _state_key(node: NodeState) -> tuple[object, ...]:
    """Everything :func:`~optsched.capacity.fit.pods_that_fit` reads of a node."""
    return (
        node.cpu,
        node.mem,
        node.pods,
        node.unknown,
        tuple(node.gpu_milli),
        tuple(node.gpu_mem),
        tuple(node.islands),
        tuple(sorted(node.ext.items())),
    )


def _fits(node: NodeState, ps: PodSet, limit: int) -> int:
    return pods_that_fit(node, ps.request, nvlink_required=ps.nvlink_required, limit=limit)


def _free_gpus(nodes: Sequence[NodeState], ps: PodSet) -> float:
    if ps.request.is_share:
        return sum(max(0, n.free_gpu_milli) for n in nodes) / FULL_GPU_MILLI
    return float(sum(n.whole_free for n in nodes))


def _domains(
    snapshot: Snapshot, nodes: list[Node], level: str, flavor_levels: tuple[str, ...]
) -> dict[tuple[str, ...], list[Node]]:
    groups: dict[tuple[str, ...], list[Node]] = {}
    for node in nodes:
        domain = domain_of(node, flavor_levels, level)
        if domain is not None:
            groups.setdefault(domain, []).append(node)
    return groups


def _levels_for(snapshot: Snapshot, cands: list[Candidates]) -> tuple[str, ...]:
    flavor = next((c.flavor for c in cands if c.flavor is not None), None)
    return snapshot.topology_levels_for(flavor)


def _demand(ps: PodSet, product: str) -> str:
    req = ps.request
    what = f"{product} GPUs" if product else "GPUs"
    if req.is_share:
        return f"{ps.needed} GPU shares of {req.gpu_milli / FULL_GPU_MILLI:g}"
    if req.gpus:
        total = ps.needed * req.gpus
        return f"{total} {what} ({ps.needed} pods x {req.gpus})" if ps.needed > 1 else f"{total} {what}"
    return f"{ps.needed} pods of {req.cpu_milli / 1000:g} CPU and {req.memory_mib} MiB"


def _never_fits(snapshot: Snapshot, ps: PodSet, cands: list[Candidates], cache: CandidateCache) -> str | None:
    """A reason if the gang could not fit even on an empty cluster, else None."""
    scopes = _scopes(snapshot, ps, cands)
    levels = _levels_for(snapshot, cands)
    best_total = 0.0
    best_label = ""
    for label, nodes in scopes:
        empty = [cache.empty_state(n) for n in nodes]
        if ps.required_topology:
            groups = _domains(snapshot, nodes, ps.required_topology, levels)
            for members in groups.values():
                states = [cache.empty_state(n) for n in members]
                if sum(_fits(s, ps, ps.needed) for s in states) >= ps.needed:
                    return None
                if _free_gpus(states, ps) >= best_total:
                    best_total, best_label = _free_gpus(states, ps), label
        else:
            if sum(_fits(s, ps, ps.needed) for s in empty) >= ps.needed:
                return None
            if _free_gpus(empty, ps) >= best_total:
                best_total, best_label = _free_gpus(empty, ps), label
    product = best_label if len(scopes) == 1 else ""
    if ps.required_topology:
        return (
            f"pod set {ps.name}: needs {_demand(ps, product)} in one {ps.required_topology}; "
            f"the largest such domain has {best_total:g} usable GPUs, so it can never fit"
        )
    return (
        f"pod set {ps.name}: needs {_demand(ps, product)}; the eligible nodes have "
        f"{best_total:g} GPUs in total, so it can never fit"
    )


# -- quota ----------------------------------------------------------------------------------------


def _quota_reason(
    snapshot: Snapshot,
    workload: Workload,
    per_pod_set: list[tuple[PodSet, list[Candidates]]],
    context: PlanContext,
) -> str | None:
    if workload.reservation is not None:
        return None
    cq = snapshot.cluster_queue_of(workload)
    if cq is None:
        return None
    before = (
        context.cache.remember(("ledger",), partial(QuotaLedger.from_snapshot, snapshot))
        if context.cache is not None
        else QuotaLedger.from_snapshot(snapshot)
    )
    ledger = context.ledger_after or before
    options: list[str] = []
    for _, cands in per_pod_set:
        for cand in cands:
            if cand.flavor is not None and cand.nodes and cand.flavor.name not in options:
                options.append(cand.flavor.name)
    first: str | None = None
    for flavor_name in options:
        # Every PodSet on this flavor where it may use it, else on its own first usable flavor.
        amounts: dict[str, int] = {}
        for ps, cands in per_pod_set:
            usable = [c.flavor.name for c in cands if c.flavor is not None and c.nodes]
            if flavor_name not in usable:
                continue
            for resource, amount in scaled(pod_quota_amounts(ps.request), ps.needed).items():
                amounts[resource] = amounts.get(resource, 0) + amount
        short = ledger.shortfall(cq.name, flavor_name, amounts)
        if short is None:
            return None
        if first is None:
            first = short.describe()
            if context.ledger_after is not None and before.shortfall(cq.name, flavor_name, amounts) is None:
                same = _quota_users(snapshot, cq.name, flavor_name, short.resource, context)
                if same:
                    first += f"; used by work admitted in this plan ({_names(same)})"
    return first


def _quota_users(
    snapshot: Snapshot, cq_name: str, flavor: str, resource: str, context: PlanContext
) -> list[Workload]:
    """Admitted workloads without a reservation whose quota use left this queue short.

    Those of the same ClusterQueue, and those of cohort members that borrow after
    the plan, or of any member if this queue could have borrowed their quota.
    """

    def find() -> list[Workload]:
        mine = snapshot.cluster_queue(cq_name)
        if mine is None:
            return []
        own = quota_of(mine, flavor, resource)
        can_borrow = own is not None and (own.borrowing_limit is None or own.borrowing_limit > 0)
        ledger = context.ledger_after
        out = []
        for w, _ in context.admitted:
            theirs = snapshot.cluster_queue_of(w)
            if w.reservation is not None or theirs is None:
                continue
            if flavor not in context.admitted_flavors.get(w.key, frozenset({flavor})):
                continue
            if theirs.name != mine.name:
                if mine.cohort is None or theirs.cohort != mine.cohort:
                    continue
                quota = quota_of(theirs, flavor, resource)
                used = ledger.used.get((theirs.name, flavor, resource), 0) if ledger is not None else 0
                if not can_borrow and (quota is None or used <= quota.nominal):
                    continue
            out.append(w)
        return out

    if context.cache is None:
        return find()
    context.cache.keep(context.admitted)
    return context.cache.remember(("quota-users", id(context.admitted), cq_name, flavor, resource), find)


# -- capacity -------------------------------------------------------------------------------------


@dataclass
class _Fit:
    pods: int
    free: float
    per_node: int
    nodes: frozenset[str]


def _cached_best_fit(
    snapshot: Snapshot, ps: PodSet, cands: list[Candidates], state: ClusterState, cache: CandidateCache | None
) -> tuple[_Fit | None, str]:
    if cache is None:
        return _best_fit(snapshot, ps, cands, state)
    cache.keep(state)
    return cache.remember(
        ("fit", id(state), shape_key(ps, cands)), lambda: _best_fit(snapshot, ps, cands, state)
    )


def _best_fit(
    snapshot: Snapshot, ps: PodSet, cands: list[Candidates], state: ClusterState
) -> tuple[_Fit | None, str]:
    """The node group where most pods of ``ps`` fit in ``state``, and the product it is on."""
    levels = _levels_for(snapshot, cands)
    memo: dict[tuple[object, ...], int] = {}

    def fits(node: NodeState) -> int:
        # Many nodes are in the same free state; count pods once per state.
        key = _state_key(node)
        if key not in memo:
            memo[key] = _fits(node, ps, ps.needed)
        return memo[key]

    best: _Fit | None = None
    best_product = ""
    for product, nodes in _scopes(snapshot, ps, cands):
        groups: list[list[Node]]
        if ps.required_topology:
            groups = list(_domains(snapshot, nodes, ps.required_topology, levels).values())
        else:
            groups = [nodes]
        for members in groups:
            states = [state.by_name[n.name] for n in members if n.name in state.by_name]
            fit = _Fit(
                pods=sum(fits(s) for s in states),
                free=_free_gpus(states, ps),
                per_node=max((s.whole_free for s in states), default=0),
                nodes=frozenset(s.name for s in states),
            )
            if best is None or (fit.pods, fit.free) > (best.pods, best.free):
                best, best_product = fit, product
    return best, best_product


def _capacity_reasons(
    snapshot: Snapshot,
    workload: Workload,
    per_pod_set: list[tuple[PodSet, list[Candidates]]],
    state_after: ClusterState,
    context: PlanContext,
) -> list[str]:
    reasons: list[str] = []
    blocked_nodes: set[str] = set()
    fits_before = True
    before = context.state_before
    for ps, cands in per_pod_set:
        fit, product = _cached_best_fit(snapshot, ps, cands, state_after, context.cache)
        if fit is None or fit.pods >= ps.needed:
            continue
        single_product = product if ps.request.gpus and not ps.allow_mixed_products else ""
        demand = _demand(ps, single_product)
        if ps.required_topology:
            text = (
                f"pod set {ps.name}: needs {demand} in one {ps.required_topology}; "
                f"the one with the most room has {fit.free:g} GPUs free"
            )
        elif ps.request.is_share:
            text = (
                f"pod set {ps.name}: needs {demand}; only {fit.pods} of {ps.needed} pods fit "
                f"({fit.free:g} GPUs of compute free on eligible nodes)"
            )
        elif ps.request.gpus and fit.free == 0:
            text = f"pod set {ps.name}: needs {demand}; no GPU is free on the eligible nodes"
        elif ps.request.gpus:
            text = (
                f"pod set {ps.name}: needs {demand}; only {fit.pods} of {ps.needed} pods fit "
                f"({fit.free:g} GPUs free on eligible nodes, at most {fit.per_node} on one node)"
            )
        else:
            text = f"pod set {ps.name}: needs {demand}; only {fit.pods} fit in the free CPU and memory"
        if ps.request.gpus and fit.free >= ps.needed * ps.request.gpu_equivalent:
            if not ps.request.is_share and fit.per_node < ps.request.gpus:
                text += "; the free GPUs are scattered over nodes"
            else:
                text += "; CPU, memory, pod slots or NVLink islands are short"
        reasons.append(text)
        blocked_nodes.update(_scope_of(cands, context.cache))
        if before is not None:
            earlier, _ = _cached_best_fit(snapshot, ps, cands, before, context.cache)
            if earlier is None or earlier.pods < ps.needed:
                fits_before = False
    if not reasons:
        return reasons
    if before is None:
        return reasons
    if not fits_before:
        reasons.append("capacity in use by running workloads")
        return reasons
    scope = frozenset(blocked_nodes)
    if context.cache is not None:
        context.cache.keep(context.admitted)
    keys, takers = (
        context.cache.remember(("takers", id(context.admitted), scope), partial(_takers, context, scope))
        if context.cache is not None
        else _takers(context, scope)
    )
    # Queue order puts higher priority first, so both groups are prefixes of the takers.
    higher = bisect.bisect_left(keys, (-workload.priority,))
    ahead = bisect.bisect_left(keys, workload.queue_key)
    if higher:
        reasons.append(f"capacity taken by higher-priority work ({_names(takers[:higher])})")
    elif ahead:
        names = _names(takers[:ahead])
        reasons.append(f"lower in the queue than admitted work that used the remaining capacity ({names})")
    elif takers:
        reasons.append(
            f"capacity used by work admitted in this plan ({_names(takers)}), which admits more in total"
        )
        stranding = _stranding(snapshot, workload, per_pod_set, before, context.cache)
        if stranding:
            reasons.append(stranding)
    return reasons


def _scope_of(cands: list[Candidates], cache: CandidateCache | None) -> frozenset[str]:
    def names() -> frozenset[str]:
        return frozenset(n.name for c in cands for n in c.nodes)

    return cache.remember(("scope", id(cands)), names) if cache is not None else names()


def _takers(
    context: PlanContext, scope: frozenset[str]
) -> tuple[list[tuple[int, float, str]], list[Workload]]:
    """Admitted workloads on any node of ``scope`` in queue order, with their queue keys."""
    found = sorted(
        ((w.queue_key, w) for w, nodes in context.admitted if not nodes.isdisjoint(scope)),
        key=lambda item: item[0],
    )
    return [k for k, _ in found], [w for _, w in found]


def _pending_gpu_sizes(snapshot: Snapshot) -> list[tuple[int, str]]:
    """(GPUs per pod, workload key) of every pending GPU pod set, smallest first; shares count as 0."""
    sizes = [
        (0 if ps.request.is_share else ps.request.gpus, w.key)
        for w in snapshot.workloads
        for ps in w.pod_sets
        if ps.request.gpus
    ]
    return sorted(sizes)


def _stranding(
    snapshot: Snapshot,
    workload: Workload,
    per_pod_set: list[tuple[PodSet, list[Candidates]]],
    before: ClusterState,
    cache: CandidateCache | None,
) -> str | None:
    """Why admitting ``workload`` would waste GPUs: its pods leave leftovers no pending pod can use."""
    pending = (
        cache.remember(("sizes",), partial(_pending_gpu_sizes, snapshot))
        if cache is not None
        else _pending_gpu_sizes(snapshot)
    )
    smallest = next((size for size, key in pending if key != workload.key), None)
    if smallest == 0:
        return None
    for ps, cands in per_pod_set:
        req = ps.request
        if not req.gpus or req.is_share:
            continue
        sizes = sorted({before.by_name[n.name].whole_free for c in cands for n in c.nodes}, reverse=True)
        fitting = [size for size in sizes if size >= req.gpus]
        if not fitting:
            continue
        leftover = fitting[0] % req.gpus
        if leftover and (smallest is None or smallest > leftover):
            return (
                f"admitting it would strand GPUs: each {req.gpus}-GPU pod leaves {leftover} of a node's "
                f"{fitting[0]} free GPUs, and no other pending pod asks for {leftover} or fewer"
            )
    return None


def _names(workloads: Sequence[Workload]) -> str:
    """The first few names, in the order given (most relevant first), and how many more."""
    shown = ", ".join(w.key for w in workloads[:MAX_NAMES])
    more = len(workloads) - MAX_NAMES
    return shown + (f" and {more} more" if more > 0 else "")
