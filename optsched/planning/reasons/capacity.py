"""Capacity reasons: how far the free capacity left after the plan falls short, and who took it.

For each PodSet the node group where most of its pods fit (per flavor and GPU
product, or per domain of a required topology level) is compared with what the
gang needs, naming the resource that binds there (:mod:`binding`). The
shortfall is then attributed: to running workloads when it did
not fit before the plan either, else to the admitted workloads on those nodes,
higher priority first, then those ahead in the queue, then the ones that let
the plan admit more in total (with the GPUs admitting this one would strand).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import partial

from optsched.capacity.eligibility import Candidates
from optsched.capacity.fragmentation import node_key
from optsched.capacity.state import ClusterState, NodeState
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Node, PodSet, Snapshot, Workload
from optsched.planning.reasons.binding import binding, limits
from optsched.planning.reasons.context import Memo, PlanContext
from optsched.planning.reasons.shared import (
    PerPodSet,
    demand,
    domains,
    fits,
    free_gpus,
    levels_for,
    names,
    scopes,
    shape_key,
)
from optsched.planning.reasons.shortfall import Shortfall, shortfall_reason


@dataclass
class _Fit:
    pods: int
    free: float
    per_node: int
    nodes: frozenset[str]


def capacity_reasons(
    snapshot: Snapshot,
    workload: Workload,
    per_pod_set: PerPodSet,
    state_after: ClusterState,
    context: PlanContext,
) -> list[Reason]:
    """The shortfall of every PodSet that does not fit ``state_after``, then who took the capacity."""
    reasons: list[Reason] = []
    blocked: set[str] = set()
    fits_before = True
    before = context.state_before
    for ps, cands in per_pod_set:
        fit, product = _cached_best_fit(snapshot, ps, cands, state_after, context.memo)
        if fit is None or fit.pods >= ps.needed:
            continue
        # Workloads of one shape share the reason: the binding resource is counted once per free state.
        key = ("shortfall", id(state_after), shape_key(ps, cands))
        reasons.append(context.memo.remember(key, partial(_shortfall, ps, fit, product, state_after)))
        blocked.update(_scope_of(cands, context.memo))
        if before is not None:
            earlier, _ = _cached_best_fit(snapshot, ps, cands, before, context.memo)
            fits_before = fits_before and earlier is not None and earlier.pods >= ps.needed
    if not reasons or before is None:
        return reasons
    if not fits_before:
        return [
            *reasons,
            Reason(code=ReasonCode.CAPACITY_IN_USE, message="capacity in use by running workloads"),
        ]
    return reasons + _attribution(snapshot, workload, per_pod_set, frozenset(blocked), before, context)


def _shortfall(ps: PodSet, fit: _Fit, product: str, state: ClusterState) -> Reason:
    """How far the best node group falls short of the gang, naming the resource that binds there."""
    req = ps.request
    what = demand(ps, product if req.gpus and not ps.allow_mixed_products else "")
    found = limits(ps, [state.by_name[name] for name in sorted(fit.nodes)])
    shortfall = Shortfall(
        pods=fit.pods,
        free=fit.free,
        per_node=fit.per_node,
        limit=binding(found, ps.needed),
        asked=tuple(limit.words for limit in found),
    )
    return shortfall_reason(ps, what, shortfall)


def _cached_best_fit(
    snapshot: Snapshot, ps: PodSet, cands: list[Candidates], state: ClusterState, memo: Memo
) -> tuple[_Fit | None, str]:
    memo.keep(state)
    return memo.remember(
        ("fit", id(state), shape_key(ps, cands)), lambda: _best_fit(snapshot, ps, cands, state, memo)
    )


def _best_fit(
    snapshot: Snapshot, ps: PodSet, cands: list[Candidates], state: ClusterState, memo: Memo
) -> tuple[_Fit | None, str]:
    """The node group where most pods of ``ps`` fit in ``state``, and the product it is on."""
    levels = levels_for(snapshot, cands)
    classes = memo.remember(("classes", id(state)), lambda: _classes(state))
    counted: dict[tuple[object, ...], tuple[int, float, int]] = {}

    def figures(key: tuple[object, ...]) -> tuple[int, float, int]:
        # Many nodes are in the same free state; count pods, free GPUs and whole GPUs once per state.
        if key not in counted:
            node = classes.example[key]
            counted[key] = (fits(node, ps, ps.needed), free_gpus([node], ps), node.whole_free)
        return counted[key]

    best: _Fit | None = None
    best_product = ""
    for product, groups in _groups(ps, cands, levels, memo):
        for members in groups:
            keys = [classes.key[n.name] for n in members if n.name in classes.key]
            per_key: dict[tuple[object, ...], int] = {}
            for key in keys:
                per_key[key] = per_key.get(key, 0) + 1
            counts = [(figures(key), times) for key, times in per_key.items()]
            fit = _Fit(
                pods=sum(f[0] * times for f, times in counts),
                free=sum(f[1] * times for f, times in counts),
                per_node=max((f[2] for f, _ in counts), default=0),
                nodes=frozenset(n.name for n in members if n.name in classes.key),
            )
            if best is None or (fit.pods, fit.free) > (best.pods, best.free):
                best, best_product = fit, product
    return best, best_product


@dataclass(frozen=True)
class _Classes:
    """Each node's free-state key in one cluster state, and one node of each key."""

    key: dict[str, tuple[object, ...]]
    example: dict[tuple[object, ...], NodeState]


def _classes(state: ClusterState) -> _Classes:
    keys = {node.name: _state_key(node) for node in state.nodes}
    example: dict[tuple[object, ...], NodeState] = {}
    for node in state.nodes:
        example.setdefault(keys[node.name], node)
    return _Classes(keys, example)


def _groups(
    ps: PodSet, cands: list[Candidates], levels: tuple[str, ...], memo: Memo
) -> list[tuple[str, list[list[Node]]]]:
    """The node groups of :func:`scopes`, split by domain of a required level; the same for every state."""

    def compute() -> list[tuple[str, list[list[Node]]]]:
        out = []
        for product, nodes in scopes(ps, cands):
            groups = (
                list(domains(nodes, ps.required_topology, levels).values())
                if ps.required_topology
                else [nodes]
            )
            out.append((product, groups))
        return out

    key = ("groups", id(cands), bool(ps.request.gpus), ps.allow_mixed_products, ps.required_topology)
    return memo.remember(key, compute)


def _state_key(node: NodeState) -> tuple[object, ...]:
    """Everything :func:`~optsched.capacity.fit.pods_that_fit` and the free-GPU sums read of a node:
    the fragmentation key (:func:`~optsched.capacity.fragmentation.node_key`) and what it leaves out."""
    return (node_key(node), node.pods, node.hami, node.tasks_total, tuple(node.islands))


def _scope_of(cands: list[Candidates], memo: Memo) -> frozenset[str]:
    return memo.remember(("scope", id(cands)), lambda: frozenset(n.name for c in cands for n in c.nodes))


def _attribution(
    snapshot: Snapshot,
    workload: Workload,
    per_pod_set: PerPodSet,
    scope: frozenset[str],
    before: ClusterState,
    context: PlanContext,
) -> list[Reason]:
    """Which admitted workloads took the capacity, most relevant first."""
    context.memo.keep(context.admitted)
    keys, takers = context.memo.remember(
        ("takers", id(context.admitted), scope), lambda: _takers(context, scope)
    )
    # Queue order puts higher priority first, so both groups are prefixes of the takers.
    higher = bisect.bisect_left(keys, (-workload.priority,))
    ahead = bisect.bisect_left(keys, workload.queue_key)
    if higher:
        return [
            _taken(
                ReasonCode.HIGHER_PRIORITY_FIRST, "capacity taken by higher-priority work", takers[:higher]
            )
        ]
    if ahead:
        text = "lower in the queue than admitted work that used the remaining capacity"
        return [_taken(ReasonCode.LOWER_IN_QUEUE, text, takers[:ahead])]
    if not takers:
        return []
    reasons = [_taken(ReasonCode.BETTER_OVERALL_PLAN, "capacity used by work admitted in this plan", takers)]
    stranding = _stranding(snapshot, workload, per_pod_set, before, context.memo)
    return [*reasons, stranding] if stranding is not None else reasons


def _taken(code: ReasonCode, text: str, takers: list[Workload]) -> Reason:
    message = f"{text} ({names(takers)})"
    if code == ReasonCode.BETTER_OVERALL_PLAN:
        message += ", which admits more in total"
    return Reason(code=code, message=message, workloads=tuple(w.key for w in takers))


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
    snapshot: Snapshot, workload: Workload, per_pod_set: PerPodSet, before: ClusterState, memo: Memo
) -> Reason | None:
    """Why admitting ``workload`` would waste GPUs: its pods leave leftovers no pending pod can use."""
    pending = memo.remember(("sizes",), lambda: _pending_gpu_sizes(snapshot))
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
            return Reason(
                code=ReasonCode.WOULD_STRAND_GPUS,
                message=f"admitting it would strand GPUs: each {req.gpus}-GPU pod leaves {leftover} of a "
                f"node's {fitting[0]} free GPUs, and no other pending pod asks for {leftover} or fewer",
                pod_set=ps.name,
                needed=req.gpus,
                available=fitting[0],
                unit="GPUs",
                scope="node",
            )
    return None
