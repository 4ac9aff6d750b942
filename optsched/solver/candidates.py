"""Candidate nodes: which nodes each PodSet may use, and how many of its pods fit on each.

Eligibility is kube-scheduler's and Kueue's (the plan's shared
``CandidateCache``, per allowed flavor) plus what is free now: a node that cannot take even one pod is
dropped. On a large cluster a PodSet keeps a bounded candidate list so the
model stays small:

* the nodes the greedy BestFit plan and the previous plan used for it (so the
  optimizer can always reproduce them);
* the tightest partly used nodes (packing wants them filled first);
* a contiguous run of nodes in topology order (block, rack, name) that can host
  the gang several times over. Successive PodSets start where the previous
  one's demand ended, so the window of workloads covers the whole cluster and
  a gang's candidates share racks. A PodSet with a required topology level
  gets whole domains of that level that can host it alone.

Eligibility, upper bounds and topology order are the same for every PodSet of
one shape, so they are computed once per shape: a window of a thousand
workloads usually holds a few dozen shapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from optsched.capacity.eligibility import CandidateCache, eligibility_key
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.fragmentation import request_key
from optsched.capacity.state import ClusterState, NodeState
from optsched.model.names import HOSTNAME_LABEL
from optsched.model.snapshot import FULL_GPU_MILLI, PodSet, ResourceFlavor, Snapshot
from optsched.settings import Settings

DomainOf = Callable[[int, tuple[str, ...], str], tuple[str, ...] | None]
"""(node index, topology levels, level) -> the node's domain path down to that level."""


@dataclass(frozen=True)
class Option:
    """A node a PodSet may use: with which flavor, and how many of its pods fit there on their own."""

    node: int
    """Index into the snapshot's nodes (and the cluster state's)."""
    flavor: str | None
    """An allowed flavor that accepts the node (a node several flavors accept is one option per flavor)."""
    ub: int
    """Most pods of this PodSet the node could take on its own (at most the PodSet's count)."""


@dataclass(frozen=True)
class _Pick:
    """What choosing one PodSet's candidates works from."""

    pod_set: PodSet
    levels: tuple[str, ...]
    usable: dict[int, tuple[str | None, ...]]
    """Nodes that could take a pod now -> the allowed flavors accepting them, in the queue's order."""
    partial: list[int]
    """Usable partly used nodes, tightest first."""
    ub: list[int]
    """Pods of this shape each node (by index) could take on its own."""
    forced: set[int]
    group: Hashable
    """The shape: PodSets of one group share topology order and the rotating start."""


class CandidateFinder:
    """Chooses the candidate nodes of PodSets one after another (the rotating start is shared)."""

    def __init__(
        self,
        snapshot: Snapshot,
        settings: Settings,
        state: ClusterState,
        domain: DomainOf,
        eligibility: CandidateCache,
    ) -> None:
        self._snapshot = snapshot
        self._eligibility = eligibility
        self._index = {node.name: i for i, node in enumerate(snapshot.nodes)}
        self._settings = settings
        self._nodes = state.nodes
        self._domain = domain
        self._free = [n.free_gpu_milli for n in state.nodes]
        self._partial = [_partly_used(n) for n in state.nodes]
        self._ub: dict[Hashable, list[int]] = {}
        self._order: dict[Hashable, list[int]] = {}
        self._cursor: dict[Hashable, float] = {}
        self._domains: dict[Hashable, tuple[list[int], list[list[int]]]] = {}
        self._usable_cache: dict[Hashable, tuple[dict[int, tuple[str | None, ...]], list[int]]] = {}
        self.pruned = 0
        """PodSets whose candidates were cut to a bounded list."""

    def options(
        self,
        pod_set: PodSet,
        flavors: list[ResourceFlavor | None],
        levels: tuple[str, ...],
        forced: frozenset[int],
    ) -> tuple[Option, ...]:
        """The candidate nodes of one PodSet, ascending; ``forced`` nodes stay where eligible."""
        ub_all = self._upper_bounds(pod_set)
        group, flavors_of, partial = self._usable(pod_set, flavors)
        required = pod_set.required_topology
        if required is not None:
            flavors_of = {
                n: f for n, f in flavors_of.items() if self._domain(n, levels, required) is not None
            }
        keep = {n for n in forced if n in flavors_of}
        chosen = self._select(_Pick(pod_set, levels, flavors_of, partial, ub_all, keep, (group, required)))
        # Kueue may give the PodSet any allowed flavor whose quota has room, and a flavor without
        # node labels accepts every node: such a node is an option under each flavor.
        return tuple(
            Option(n, flavor, min(pod_set.count, ub_all[n]))
            for n in sorted(chosen)
            for flavor in flavors_of[n]
        )

    # -- eligibility ---------------------------------------------------------------------------

    def _upper_bounds(self, pod_set: PodSet) -> list[int]:
        req = pod_set.request
        key = (request_key(req), pod_set.nvlink_required)
        if key not in self._ub:
            self._ub[key] = [
                pods_that_fit(n, req, nvlink_required=pod_set.nvlink_required) for n in self._nodes
            ]
        return self._ub[key]

    def _usable(
        self, pod_set: PodSet, flavors: list[ResourceFlavor | None]
    ) -> tuple[Hashable, dict[int, tuple[str | None, ...]], list[int]]:
        """Nodes that could take a pod now (-> the flavors accepting them) and the partly used ones."""
        # One shape: what node filtering reads, and what the upper bounds read.
        group = (eligibility_key(flavors, pod_set), request_key(pod_set.request))
        if group not in self._usable_cache:
            ub_all = self._upper_bounds(pod_set)
            flavors_of: dict[int, tuple[str | None, ...]] = {}
            for eligible in self._eligibility.for_flavors(flavors, pod_set):
                name = eligible.flavor.name if eligible.flavor is not None else None
                for node in eligible.nodes:
                    n = self._index[node.name]
                    if ub_all[n] > 0:
                        flavors_of[n] = (*flavors_of.get(n, ()), name)
            partial = sorted((n for n in flavors_of if self._partial[n]), key=lambda n: (self._free[n], n))
            self._usable_cache[group] = (flavors_of, partial)
        flavors_of, partial = self._usable_cache[group]
        return group, flavors_of, partial

    # -- candidate pruning ---------------------------------------------------------------------

    def _select(self, pick: _Pick) -> set[int]:
        settings = self._settings
        limit = settings.candidates_per_podset
        if len(pick.usable) <= max(limit, settings.min_candidates):
            return set(pick.usable)
        self.pruned += 1
        chosen = set(pick.forced)
        if pick.group not in self._order:
            self._order[pick.group] = sorted(pick.usable, key=lambda n: self._topology_key(n, pick.levels))
        order = self._order[pick.group]
        # The tightest partly used nodes: packing fills them first.
        if pick.pod_set.required_topology is None:
            chosen.update(pick.partial[: max(2, limit // 4)])
        start = int(self._cursor.get(pick.group, 0.0)) % len(order)
        if pick.pod_set.required_topology is not None:
            self._take_domains(pick, order, start, chosen)
        else:
            self._take_run(pick, order, start, chosen)
        return chosen

    def _take_run(self, pick: _Pick, order: list[int], start: int, chosen: set[int]) -> None:
        """Nodes in topology order from ``start`` until they host the gang several times over."""
        settings = self._settings
        count = pick.pod_set.count
        want = settings.candidate_capacity_factor * count
        ub = pick.ub
        capacity = sum(ub[n] for n in chosen)
        consumed = 0.0
        covered = 0
        for step in range(len(order)):
            n = order[(start + step) % len(order)]
            if covered < count:
                covered += ub[n]
                consumed += 1.0 if covered <= count else 1.0 - (covered - count) / max(1, ub[n])
            if n in chosen:
                continue
            if len(chosen) >= settings.candidates_per_podset or (
                capacity >= want and len(chosen) >= settings.min_candidates
            ):
                break
            chosen.add(n)
            capacity += ub[n]
        self._cursor[pick.group] = self._cursor.get(pick.group, 0.0) + max(consumed, 1e-3)

    def _take_domains(self, pick: _Pick, order: list[int], start: int, chosen: set[int]) -> None:
        """Whole domains of the required level, from ``start`` on, each able to host the gang alone."""
        limit = self._settings.candidates_per_podset
        want = self._settings.candidate_capacity_factor * pick.pod_set.count
        ub = pick.ub
        ends, domains = self._domains_in_order(pick, order)
        first_at = bisect_left(ends, start) % len(domains)
        capacity = 0
        first = True
        for offset in range(len(domains)):
            members = domains[(first_at + offset) % len(domains)]
            room = sum(ub[n] for n in members)
            if room < pick.pod_set.needed:
                continue
            members = sorted(members, key=lambda n: -ub[n])[: max(limit, 1)]
            chosen.update(members)
            capacity += sum(ub[n] for n in members)
            if first:
                self._cursor[pick.group] = self._cursor.get(pick.group, 0.0) + len(members)
                first = False
            if capacity >= want or len(chosen) >= 2 * limit:
                break

    def _domains_in_order(self, pick: _Pick, order: list[int]) -> tuple[list[int], list[list[int]]]:
        """Domains of the required level in topology order, with each one's last position in ``order``."""
        level = pick.pod_set.required_topology
        assert level is not None
        if pick.group not in self._domains:
            # Domains are contiguous in topology order; remember where each one ends.
            grouped: dict[tuple[str, ...] | None, list[int]] = {}
            for n in order:
                grouped.setdefault(self._domain(n, pick.levels, level), []).append(n)
            position = {n: i for i, n in enumerate(order)}
            ordered = sorted(grouped.values(), key=lambda m: position[m[0]])
            self._domains[pick.group] = ([position[m[-1]] for m in ordered], ordered)
        return self._domains[pick.group]

    def _topology_key(self, n: int, levels: tuple[str, ...]) -> tuple[str, ...]:
        node = self._snapshot.nodes[n]
        return (*(node.labels.get(level, "") for level in levels if level != HOSTNAME_LABEL), node.name)


def _partly_used(node: NodeState) -> bool:
    healthy = sum(node.healthy) * FULL_GPU_MILLI
    return 0 < node.free_gpu_milli < healthy
