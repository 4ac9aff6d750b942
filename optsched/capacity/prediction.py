"""Whole GPUs planned as NVIDIA's device plugin will hand them out, so the plan is what the pods get.

On a device-plugin node nothing steers which GPUs a container receives: the
device plugin's best-effort policy (:mod:`optsched.topology.best_effort`) picks
them from the GPUs free when the pod arrives. So on every such node (a
:class:`NodeState` with a :attr:`~NodeState.board`, GPU indices known) the plan
gives each whole-GPU pod exactly that pick, pods taken in the prediction order:

    biggest pods first, then workloads in queue order (priority, then age: the
    order of the plan's workloads), then PodSets in the workload's order, then
    pod index;

each pod's pick leaves the free set before the next. The free set is the
node's healthy GPUs free before the plan, less the GPUs the plan gives shares
there. The prediction holds when the pods are bound on the node one at a time
in that order, so the controller must ungate them so.

A policy places pods first; :func:`predict_placement` then replaces their
whole-GPU indices node by node. The policy's own indices are kept as a promise:
every ``nvlink: required`` pod in one NVLink island, and on each node, per pod
size, at least as many pods inside one island as the policy placed there (at
least what the solver's NVLink stage counted). Where the picks keep that
promise, every pod is predicted. Where they do not, the longest run of picks
(in the order) after which the other pods can still keep the promise is kept;
those others take island-aware indices (a pod that needs an island the
tightest island that holds it, the rest as few islands as possible). From the
first pod off its pick on, every pod of the node is marked ``enforcement:
none``: the node's real free set differs from the plan's from there. If no run
works, the node keeps the policy's indices, all marked ``none``. No set ever
over-commits a GPU.

What this costs the NVLink objective: nothing in the plan itself, since the
in-island counts it scores never drop. The costs are elsewhere: pods marked
``none`` where a promise and a pick conflict (their GPUs are then up to the
device plugin, and the agent's read-back reports what they got), and the
island-aware choice's care for later plans is NVIDIA's, not optsched's: a
1-GPU pod takes the lowest free GPU even where it opens a whole NVLink pair,
where the island-aware choice took a GPU of an already broken island.

Picks are memoised by (board, free set, size): nodes of one kind in one state
cost one search, and the exact search is bounded
(:mod:`optsched.topology.best_effort`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from optsched.capacity.state import NodeState, pick_whole_gpus
from optsched.model.placement import Enforcement, Placement, PodPlacement, WorkloadAssignment
from optsched.model.snapshot import PodSet, Workload
from optsched.topology.best_effort import Board, best_effort

_Gpus = tuple[int, ...]


@dataclass(frozen=True)
class _Pod:
    """One whole-GPU pod on a predicted node, where it sits in the placement and in the order."""

    order: tuple[int, int, int, int]
    workload: str
    pod_set: str
    position: int
    """Its place in the PodSet's pod list."""
    size: int
    required: bool
    planned: _Gpus


@lru_cache(maxsize=65_536)
def _pick(board: Board, free: _Gpus, size: int) -> _Gpus:
    return best_effort(free, size, board)


def predicted_pick(board: Board, free: Iterable[int], size: int) -> _Gpus:
    """NVIDIA's best-effort pick of ``size`` GPUs among ``free`` (memoised)."""
    return _pick(board, tuple(sorted(free)), size)


def predict_placement(
    placement: Placement, workloads: Iterable[Workload], nodes: Mapping[str, NodeState]
) -> Placement:
    """``placement`` with whole-GPU indices predicted on device-plugin nodes (module docstring).

    ``nodes`` are the nodes before the plan, by name; ``workloads`` the
    snapshot's (an admitted key that is none of them is left as it is). Pods
    on other nodes are unchanged.
    """
    by_key = {w.key: w for w in workloads}
    on_nodes = _OnNodes.collect(placement, by_key, nodes)
    changes: dict[tuple[str, str, int], tuple[_Gpus, int | None, bool]] = {}
    for node, pods in on_nodes.whole.items():
        state = nodes[node]
        assert state.board is not None
        pods.sort(key=lambda p: p.order)
        if node in on_nodes.blind:
            chosen, predicted = [p.planned for p in pods], 0
        else:
            free = set(state.fully_free_gpus()) - on_nodes.shared.get(node, set())
            chosen, predicted = _predict_node(state.board, state.islands, free, pods)
        for i, (pod, gpus) in enumerate(zip(pods, chosen, strict=True)):
            order = None if node in on_nodes.blind else i  # where nothing is predicted, order is moot
            changes[(pod.workload, pod.pod_set, pod.position)] = (gpus, order, i < predicted)
    return _apply(placement, changes)


@dataclass
class _OnNodes:
    """The placement's GPU pods on predicted nodes: whole-GPU pods, GPUs shares take, nodes not known."""

    whole: dict[str, list[_Pod]]
    shared: dict[str, set[int]]
    blind: set[str]
    """Nodes where a GPU pod has no indices or GPUs of unknown index are in use: nothing is predicted."""

    @classmethod
    def collect(
        cls, placement: Placement, by_key: Mapping[str, Workload], nodes: Mapping[str, NodeState]
    ) -> _OnNodes:
        known = sorted((k for k in placement.admitted if k in by_key), key=lambda k: by_key[k].queue_key)
        rank = {key: i for i, key in enumerate(known)}
        out = cls({}, {}, set())
        for key in known:
            pod_sets = {ps.name: (i, ps) for i, ps in enumerate(by_key[key].pod_sets)}
            for name, placed in placement.admitted[key].pods.items():
                if name not in pod_sets:
                    continue
                number, ps = pod_sets[name]
                for position, pod in enumerate(placed):
                    state = nodes.get(pod.node)
                    if state is None or state.board is None or not ps.request.gpus:
                        continue
                    if pod.gpus is None or not state.indices_known:
                        out.blind.add(pod.node)
                    elif ps.request.is_share:
                        out.shared.setdefault(pod.node, set()).update(pod.gpus)
                    else:
                        if ps.request.split_gpus:
                            out.blind.add(pod.node)  # the device plugin picks container by container
                        out.whole.setdefault(pod.node, []).append(
                            _pod(ps, key, rank[key], number, position, pod)
                        )
        return out


def _pod(ps: PodSet, key: str, rank: int, number: int, position: int, pod: PodPlacement) -> _Pod:
    assert pod.gpus is not None
    size = ps.request.gpus
    return _Pod((-size, rank, number, pod.index), key, ps.name, position, size, ps.nvlink_required, pod.gpus)


def _predict_node(
    board: Board, islands: Sequence[_Gpus], free: set[int], pods: list[_Pod]
) -> tuple[list[_Gpus], int]:
    """The pods' GPUs in order, and how many of the first ones are the predicted picks."""
    planned = [gpu for p in pods for gpu in p.planned]
    if len(set(planned)) != len(planned) or not set(planned) <= free:
        return [p.planned for p in pods], 0  # not a placement of free GPUs: nothing to predict from
    promised = _in_island_counts(islands, pods, [p.planned for p in pods])
    picks: list[_Gpus] = []
    left = set(free)
    for pod in pods:
        pick = predicted_pick(board, left, pod.size)
        picks.append(pick)
        left.difference_update(pick)
    for k in range(len(pods), 0, -1):
        rest = _complete(islands, free, pods, picks[:k], promised)
        if rest is not None:
            chosen = picks[:k] + rest
            # A pod is predicted while every pod before it, and it, got the pick (the free sets agree).
            run = next((i for i, (a, b) in enumerate(zip(chosen, picks, strict=True)) if a != b), len(pods))
            return chosen, run
    return [p.planned for p in pods], 0


def _in_one_island(islands: Sequence[_Gpus], gpus: _Gpus) -> bool:
    return any(set(gpus) <= set(island) for island in islands)


def _in_island_counts(islands: Sequence[_Gpus], pods: list[_Pod], sets: Sequence[_Gpus]) -> dict[int, int]:
    """Per pod size of 2 or more: how many of ``pods`` have their set in ``sets`` inside one island."""
    counts: dict[int, int] = {}
    for pod, gpus in zip(pods, sets, strict=False):
        if pod.size >= 2 and _in_one_island(islands, gpus):
            counts[pod.size] = counts.get(pod.size, 0) + 1
    return counts


def _complete(
    islands: Sequence[_Gpus], free: set[int], pods: list[_Pod], prefix: list[_Gpus], promised: dict[int, int]
) -> list[_Gpus] | None:
    """GPUs for the pods after ``prefix`` that keep the island promise; None if that is not possible."""
    k = len(prefix)
    if any(
        p.required and p.size >= 2 and not _in_one_island(islands, g)
        for p, g in zip(pods[:k], prefix, strict=True)
    ):
        return None
    rest = pods[k:]
    short = {g: n - _in_island_counts(islands, pods, prefix).get(g, 0) for g, n in promised.items()}
    needs = [p.required and p.size >= 2 for p in rest]
    for g in short:
        short[g] -= sum(1 for p in rest if p.required and p.size == g)
    for i, pod in enumerate(rest):
        if not needs[i] and pod.size >= 2 and short.get(pod.size, 0) > 0:
            needs[i] = True
            short[pod.size] -= 1
    left = free.difference(gpu for gpus in prefix for gpu in gpus)
    chosen: dict[int, _Gpus] = {}
    for i in sorted(range(len(rest)), key=lambda i: (not needs[i], -rest[i].size, i)):
        size = rest[i].size
        if needs[i]:
            fitting = [f for f in (sorted(left.intersection(island)) for island in islands) if len(f) >= size]
            gpus = min(fitting, key=lambda f: (len(f), f[0]))[:size] if fitting else None
        else:
            gpus = pick_whole_gpus(list(islands), left, size)
        if gpus is None:
            return None
        chosen[i] = tuple(sorted(gpus))
        left.difference_update(gpus)
    if any(n > 0 for n in short.values()):
        return None
    return [chosen[i] for i in range(len(rest))]


def _apply(
    placement: Placement, changes: dict[tuple[str, str, int], tuple[_Gpus, int | None, bool]]
) -> Placement:
    """The placement with the changed pods: their GPUs and place in the node's order (the controller hands
    GPUs out in it, so the predicted pods get theirs first), and enforcement ``none`` where not predicted."""
    if not changes:
        return placement
    out = Placement()
    for key, assignment in placement.admitted.items():
        pods: dict[str, list[PodPlacement]] = {}
        for name, placed in assignment.pods.items():
            pods[name] = []
            for position, pod in enumerate(placed):
                change = changes.get((key, name, position))
                if change is not None:
                    gpus, order, predicted = change
                    update: dict[str, object] = {"gpus": gpus, "node_order": order}
                    if not predicted:
                        update["enforcement"] = Enforcement.NONE
                    pod = pod.model_copy(update=update)
                pods[name].append(pod)
        out.admitted[key] = WorkloadAssignment(pods=pods, flavors=dict(assignment.flavors))
    return out
