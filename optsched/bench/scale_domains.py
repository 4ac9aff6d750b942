"""Free capacity per topology domain for one PodSet: the facts the scale bounds are built from.

A PodSet's pods fit a node as :func:`optsched.capacity.fit.pods_that_fit`
counts them on the snapshot as it is (the count the solver and every greedy
policy use), on the nodes its filters allow
(:class:`optsched.capacity.eligibility.CandidateCache`). From those counts,
grouped by product and by rack and block, follow the products a PodSet can run
on, the fewest racks and blocks its pods can span, and whether one pod can sit
in one NVLink island. Counts are memoised by everything they depend on, so a
queue of thousands of workloads of a few shapes costs a few passes over the nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from optsched.capacity.eligibility import CandidateCache, eligibility_key, flavors_of
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.state import ClusterState, NodeState
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS
from optsched.model.snapshot import Node, PodSet, ResourceFlavor, Snapshot, Workload
from optsched.topology.domains import block_level, rack_level

_Room = tuple[tuple[Node, int], ...]
"""Nodes of one product that hold at least one pod, each with how many."""


@dataclass(frozen=True)
class PodSetFit:
    """Where one PodSet can go at best."""

    products: frozenset[str]
    """Products whose nodes alone hold the pods it needs (in one domain where it requires one)."""
    racks: int
    """Fewest racks of one allowed product that hold the pods it needs (0 if none do)."""
    blocks: int
    island_possible: bool
    """A pod of several whole GPUs fits one NVLink island on some node of an allowed product."""


class Capacity:
    """Pods per node of each PodSet shape, memoised, on one snapshot's free capacity."""

    def __init__(self, snapshot: Snapshot, state: ClusterState) -> None:
        self.snapshot = snapshot
        self.state = state
        self.cache = CandidateCache(snapshot)
        self._rooms: dict[Hashable, list[tuple[ResourceFlavor | None, dict[str, _Room]]]] = {}
        # Keyed by id(room); each entry keeps its room alive so no id is reused while cached.
        self._splits: dict[tuple[int, str], tuple[_Room, list[_Room]]] = {}
        self._sums: dict[tuple[int, str], tuple[_Room, list[int]]] = {}
        self._islands: dict[str, int] = {}

    def rooms(self, workload: Workload, ps: PodSet) -> list[tuple[ResourceFlavor | None, dict[str, _Room]]]:
        """Per allowed flavor: per product, the eligible nodes holding at least one pod, with how many."""
        flavors = flavors_of(self.snapshot, workload, ps)
        key = (eligibility_key(flavors, ps), ps.request.gpu_milli, ps.request.gpu_mem_percent)
        hit = self._rooms.get(key)
        if hit is None:
            hit = self._rooms[key] = [
                (c.flavor, self._by_product(c.nodes, ps)) for c in self.cache.for_flavors(flavors, ps)
            ]
        return hit

    def _by_product(self, nodes: Sequence[Node], ps: PodSet) -> dict[str, _Room]:
        out: dict[str, list[tuple[Node, int]]] = {}
        for node in nodes:
            room = pods_that_fit(
                self.state.by_name[node.name], ps.request, nvlink_required=ps.nvlink_required
            )
            if room > 0:
                out.setdefault(node.product, []).append((node, room))
        return {product: tuple(room) for product, room in out.items()}

    def spans(self, room: _Room, ps: PodSet, rack: str, block: str | None) -> tuple[int, int] | None:
        """Fewest racks and blocks holding ``ps.needed`` pods on ``room``; None if it cannot fit at all.

        Where the PodSet requires a level, within the best single domain of it.
        """
        domains = [room] if ps.required_topology is None else self._split(room, ps.required_topology)
        best: tuple[int, int] | None = None
        for domain in domains:
            racks = _fewest(self._totals(domain, rack), ps.needed)
            if racks is None:
                continue
            blocks = _fewest(self._totals(domain, block), ps.needed) if block else 1
            candidate = (racks, blocks if blocks is not None else racks)
            best = candidate if best is None else (min(best[0], candidate[0]), min(best[1], candidate[1]))
        return best

    def _split(self, room: _Room, level: str) -> list[_Room]:
        """``room`` per domain of ``level`` (nodes without the label belong to none); memoised."""
        key = (id(room), level)
        hit = self._splits.get(key)
        if hit is None:
            grouped: dict[str, list[tuple[Node, int]]] = {}
            for node, pods in room:
                value = node.labels.get(level)
                if value is not None:
                    grouped.setdefault(value, []).append((node, pods))
            hit = self._splits[key] = (room, [tuple(d) for d in grouped.values()])
        return hit[1]

    def _totals(self, room: _Room, label: str) -> list[int]:
        """Pods per domain of ``label``, largest first (a missing label is one domain, as summaries count)."""
        key = (id(room), label)
        hit = self._sums.get(key)
        if hit is None:
            by_domain: dict[str, int] = {}
            for node, pods in room:
                value = node.labels.get(label, "")
                by_domain[value] = by_domain.get(value, 0) + pods
            hit = self._sums[key] = (room, sorted(by_domain.values(), reverse=True))
        return hit[1]

    def largest_free_island(self, node: Node) -> int:
        hit = self._islands.get(node.name)
        if hit is None:
            hit = self._islands[node.name] = _largest_free_island(self.state.by_name[node.name])
        return hit

    def island_room(self, size: int, *, aligned: bool) -> int:
        """Fully free GPUs of the islands with at least ``size`` of them; ``aligned``: whole multiples of it.

        ``aligned`` is for pods whose sizes are all multiples of ``size``: an
        island of f free GPUs gives them ``size * (f // size)`` at most.
        """
        total = 0
        for node in self.state.nodes:
            free = set(node.fully_free_gpus())
            for island in node.islands:
                count = len(free.intersection(island))
                if count >= size:
                    total += size * (count // size) if aligned else count
        return total


def _largest_free_island(node: NodeState) -> int:
    free = set(node.fully_free_gpus())
    return max((len(free.intersection(island)) for island in node.islands), default=0)


def pod_set_capacity(capacity: Capacity, workload: Workload, ps: PodSet) -> PodSetFit:
    """The best a PodSet can do on the snapshot's free capacity (see :class:`PodSetFit`)."""
    products: set[str] = set()
    racks, blocks, island = 0, 0, False
    multi_gpu = ps.request.gpus > 1 and not ps.request.is_share
    for flavor, by_product in capacity.rooms(workload, ps):
        levels = capacity.snapshot.topology_levels_for(flavor)
        rack = rack_level(levels) or DEFAULT_TOPOLOGY_LEVELS[1]
        block = block_level(levels)
        for product, room in by_product.items():
            spans = capacity.spans(room, ps, rack, block)
            if spans is None:
                continue
            products.add(product)
            racks = min(racks, spans[0]) if racks else spans[0]
            blocks = min(blocks, spans[1]) if blocks else spans[1]
            if multi_gpu and not island:
                island = any(capacity.largest_free_island(node) >= ps.request.gpus for node, _ in room)
    return PodSetFit(frozenset(products), racks, blocks, island)


def _fewest(totals: list[int], needed: int) -> int | None:
    """Fewest of the domains (pods each holds, largest first) that hold ``needed`` pods together."""
    held = 0
    for count, pods in enumerate(totals, start=1):
        held += pods
        if held >= needed:
            return count
    return None
