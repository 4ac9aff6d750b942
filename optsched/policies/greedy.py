"""Greedy baselines: walk the queue, place each gang whole with a per-pod node chooser.

This is what a Kueue-plus-scheduler stack does today, one workload at a time:
Kueue's queue order (priority, then age; a workload that does not fit is
skipped, as in BestEffortFIFO), all-or-nothing gangs (``minCount`` honoured),
ClusterQueue quota with cohort borrowing, one GPU product per gang, required
and preferred topology domains, and a pluggable rule for picking each pod's
node (FirstFit, BestFit, FGD, ...). The optimizer is measured against these.

``tas_placement`` mimics Kueue Topology-Aware Scheduling: each gang goes to
the lowest-level topology domain that can hold it, tightest first, pods
packed onto the most-allocated nodes, and GPU indices left to chance.

Both end as every policy does: on device-plugin nodes the whole-GPU pods take
the GPUs NVIDIA's device plugin will give them
(:func:`optsched.capacity.prediction.predict_placement`), the walk's own
indices standing as the NVLink promise that prediction keeps. So TAS's plan
shows what its pods really get there, and ``island_aware=False`` shows its
lowest free indices only where a plan's indices are enforced as planned (DRA).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from optsched.capacity.baseline import Baseline
from optsched.capacity.eligibility import Candidates
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.fragmentation import node_key
from optsched.capacity.prediction import predict_placement
from optsched.capacity.state import NodeState
from optsched.errors import InputError
from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, scaled
from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.model.snapshot import ClusterQueue, Node, PodSet, Snapshot, Workload
from optsched.policies.attempt import Attempt
from optsched.policies.base import NodeChooser
from optsched.policies.choosers import MostAllocated
from optsched.policies.levels import levels_to_try
from optsched.policies.pool import RoomPool, StateIndex, room_check
from optsched.topology.domains import domain_of

_DomainGroups = list[tuple[tuple[str, ...], list[NodeState]]]

ORDERS = ("queue", "given")
"""``queue``: Kueue order (priority desc, creation asc); ``given``: the snapshot's order."""


def ordered_workloads(snapshot: Snapshot, order: str) -> list[Workload]:
    if order == "queue":
        return sorted(snapshot.workloads, key=lambda w: w.queue_key)
    if order == "given":
        return list(snapshot.workloads)
    raise InputError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}", field="order")


def greedy_placement(
    snapshot: Snapshot,
    chooser: NodeChooser,
    *,
    order: str = "queue",
    topology_aware: bool = True,
    island_aware: bool = True,
    baseline: Baseline | None = None,
) -> Placement:
    """Place pending workloads one at a time in ``order``, each pod where ``chooser`` says.

    ``topology_aware=False`` ignores preferred topology (required topology is a
    hard constraint and always honoured); ``island_aware=False`` takes the
    lowest free GPU indices instead of the chooser's NVLink-aware pick (pods
    marked ``nvlink_required`` still get one island).
    """
    base = Baseline.reuse(snapshot, baseline)
    greedy = _Greedy(base, chooser, topology_aware=topology_aware, island_aware=island_aware, tas=False)
    placement = greedy.run(ordered_workloads(snapshot, order))
    return predict_placement(placement, snapshot.workloads, base.state.by_name)


def tas_placement(snapshot: Snapshot, baseline: Baseline | None = None) -> Placement:
    """Kueue TAS-style placement: lowest-level domain that holds the gang, BestFit, no lookahead."""
    base = Baseline.reuse(snapshot, baseline)
    greedy = _Greedy(base, MostAllocated(), topology_aware=True, island_aware=False, tas=True)
    placement = greedy.run(ordered_workloads(snapshot, "queue"))
    return predict_placement(placement, snapshot.workloads, base.state.by_name)


class _Greedy:
    def __init__(
        self,
        baseline: Baseline,
        chooser: NodeChooser,
        *,
        topology_aware: bool,
        island_aware: bool,
        tas: bool,
    ) -> None:
        snapshot = baseline.snapshot
        self.snapshot = snapshot
        self.chooser = chooser
        self.topology_aware = topology_aware
        self.island_aware = island_aware
        self.tas = tas
        self.state = baseline.state.copy()
        self.ledger = baseline.ledger.copy()
        self.nodes: dict[str, Node] = {n.name: n for n in snapshot.nodes}
        self.cache = baseline.eligibility
        self.keys: dict[str, Hashable] = {}
        self.product = {n.name: n.product for n in snapshot.nodes}
        self.free: dict[str, int] = {}
        for state in self.state.nodes:
            product = self.product[state.name]
            self.free[product] = self.free.get(product, 0) + max(0, state.free_gpu_milli)
        self.scopes: dict[tuple[int, str | None], list[NodeState]] = {}
        """Working states of a cached candidate list (by identity) and GPU product."""
        self.indexes: dict[Hashable, StateIndex] = {}
        """The same lists grouped by free state (deterministic choosers only), by scope key."""
        self.domain_cache: dict[Hashable, tuple[list[NodeState], _DomainGroups]] = {}
        """Domain groups of a node list by (list identity, levels, level); the list is kept alive here."""
        self.indexed: dict[str, list[StateIndex]] = {}
        """Node name -> the indexes that hold it, re-filed on every booking."""
        # Nodes in the same free state score the same under a deterministic chooser, so only the
        # first of each is offered; a chooser that breaks ties at random sees every node.
        self.distinct = not chooser.random_ties

    def run(self, workloads: Sequence[Workload]) -> Placement:
        placement = Placement()
        for workload in workloads:
            assignment = self.place_workload(workload)
            if assignment is not None:
                placement.admitted[workload.key] = assignment
        return placement

    # -- one workload -------------------------------------------------------------------------

    def place_workload(self, workload: Workload) -> WorkloadAssignment | None:
        """Place every PodSet of ``workload`` or nothing; the working state changes only on success."""
        per_pod_set = [(ps, self.cache.get(workload, ps)) for ps in workload.pod_sets]
        if not per_pod_set or any(not any(c.nodes for c in cands) for _, cands in per_pod_set):
            return None
        cq = self.snapshot.cluster_queue_of(workload) if workload.reservation is None else None
        gpu_sets = [ps for ps in workload.pod_sets if ps.request.gpus]
        mixed = all(ps.allow_mixed_products for ps in gpu_sets)
        single = sum(ps.count for ps in gpu_sets) <= 1
        # Cheap necessary condition: enough free GPU compute on one product (or on all, if mixing).
        demand = sum(ps.needed * ps.request.gpu_milli_total for ps in gpu_sets)
        room = sum(self.free.values()) if mixed or single else max(self.free.values(), default=0)
        if demand > room:
            return None
        groups: list[str | None] = [None] if mixed or single else list(self._product_groups(per_pod_set))
        for product in groups:
            attempt = Attempt(self.keys, self.free, self.product, self._refile if self.distinct else None)
            ledger = self.ledger.copy() if cq is not None else None
            assignment = WorkloadAssignment()
            for ps, cands in per_pod_set:
                placed = self._place_pod_set(ps, cands, product, attempt, ledger, cq)
                if placed is None:
                    attempt.rollback()
                    break
                assignment.flavors[ps.name], assignment.pods[ps.name] = placed
            else:
                if ledger is not None:
                    self.ledger = ledger
                return assignment
        return None

    def _product_groups(self, per_pod_set: list[tuple[PodSet, list[Candidates]]]) -> list[str]:
        """GPU products every GPU PodSet may use, best first.

        Products with enough free GPU compute for the whole gang come first; among
        them, the product of the node the chooser would pick for the first pod,
        then the others by most free GPUs.
        """
        allowed: set[str] | None = None
        for ps, cands in per_pod_set:
            if ps.request.gpus:
                here = {n.product for cand in cands for n in cand.nodes}
                allowed = here if allowed is None else allowed & here
        if not allowed or len(allowed) == 1:
            return sorted(allowed or ())
        fits: dict[str, bool] = dict.fromkeys(allowed, True)
        free: dict[str, int] = dict.fromkeys(allowed, 0)
        first_choice: str | None = None
        for ps, cands in per_pod_set:
            if not ps.request.gpus:
                continue
            for product in allowed:
                room = sum(self._free_milli(cand, product) for cand in cands)
                if room < ps.needed * ps.request.gpu_milli_total:
                    fits[product] = False
                free[product] += room
            if first_choice is None:
                choice = self.chooser.choose(self._first_pool(ps, cands, allowed), ps.request)
                if choice is not None:
                    first_choice = self.nodes[choice[0].name].product
        return sorted(allowed, key=lambda p: (not fits[p], p != first_choice, -free[p], p))

    def _place_pod_set(
        self,
        ps: PodSet,
        cands: list[Candidates],
        product: str | None,
        attempt: Attempt,
        ledger: QuotaLedger | None,
        cq: ClusterQueue | None,
    ) -> tuple[str | None, list[PodPlacement]] | None:
        for cand in cands:
            flavor = cand.flavor.name if cand.flavor is not None else None
            group = product if ps.request.gpus else None
            states = self._scope(cand, group)
            if not states:
                continue
            limit = ps.count
            per_pod = pod_quota_amounts(ps.request)
            if ledger is not None and cq is not None and flavor is not None:
                limit = min(limit, ledger.max_pods(cq.name, flavor, per_pod))
                if limit < ps.needed:
                    continue
            levels = self.snapshot.topology_levels_for(cand.flavor)
            index = self.indexes.get((id(cand), group))
            pods = self._place_in_topology(ps, states, limit, attempt, levels, index)
            if pods is None:
                continue
            if ledger is not None and cq is not None and flavor is not None:
                ledger.charge(cq.name, flavor, scaled(per_pod, len(pods)))
            return flavor, pods
        return None

    # -- topology -----------------------------------------------------------------------------

    def _place_in_topology(
        self,
        ps: PodSet,
        states: list[NodeState],
        limit: int,
        attempt: Attempt,
        levels: tuple[str, ...],
        index: StateIndex | None = None,
    ) -> list[PodPlacement] | None:
        try_levels, anywhere = levels_to_try(ps, levels, tas=self.tas, preferred=self.topology_aware)
        for level in try_levels:
            for domain in self._domains_best_fit(ps, states, level, levels):
                pods = self._place_pods(ps, domain, limit, attempt)
                if pods is not None:
                    return pods
        return self._place_pods(ps, states, limit, attempt, index) if anywhere else None

    def _domains_best_fit(
        self, ps: PodSet, states: list[NodeState], level: str, levels: tuple[str, ...]
    ) -> list[list[NodeState]]:
        """Domains of ``level`` that can hold the gang, fewest free GPUs first (Kueue TAS BestFit)."""
        counted: dict[Hashable, int] = {}
        fitting = []
        for domain, members in self._domains(states, levels, level):
            room = 0
            for s in members:
                # Nodes in one free state (pod slots and HAMi sharing too) hold the same pods: count once.
                key = (self._key(s), s.pods, s.hami)
                if key not in counted:
                    counted[key] = pods_that_fit(
                        s, ps.request, nvlink_required=ps.nvlink_required, limit=ps.needed
                    )
                room += counted[key]
            if room < ps.needed:
                continue
            free = sum(max(0, s.free_gpu_milli) for s in members) if ps.request.gpus else 0
            fitting.append((free, sum(s.cpu for s in members), domain, members))
        fitting.sort(key=lambda item: (item[0], item[1], item[2]))
        return [members for *_, members in fitting]

    # -- pods ---------------------------------------------------------------------------------

    def _place_pods(
        self,
        ps: PodSet,
        states: list[NodeState],
        limit: int,
        attempt: Attempt,
        index: StateIndex | None = None,
    ) -> list[PodPlacement] | None:
        """Up to ``limit`` pods on ``states``; None (and nothing booked) if fewer than needed fit.

        ``index`` is ``states`` grouped by free state, kept current by the attempt's bookings.
        """
        mark = len(attempt.booked)
        req = ps.request
        placed: list[PodPlacement] = []
        fits = room_check(ps)
        # A list no index holds (a domain's nodes) gets one for this gang, re-filed here as it books.
        local = index is None and self.distinct
        if local:
            index = StateIndex(states, self._key)
        pool = RoomPool(states, fits) if index is None else None
        for _ in range(limit):
            offered = pool.offered() if pool is not None else index.offered(fits) if index else []
            choice = self._choose(ps, offered)
            if choice is None:
                break
            node, gpus = choice
            # No index is promised where the node picks: GPUs of unknown index are in use there.
            promise = not req.gpus or (bool(gpus) and (node.indices_known or req.is_share))
            attempt.take(node, req, gpus)
            if pool is not None:
                pool.booked(node)
            elif local and index is not None:
                index.refile(node)
            placed.append(
                PodPlacement(index=len(placed), node=node.name, gpus=tuple(gpus) if promise else None)
            )
        if len(placed) >= ps.needed:
            return placed
        attempt.rollback(mark)
        return None

    def _choose(self, ps: PodSet, pool: list[NodeState]) -> tuple[NodeState, list[int]] | None:
        req = ps.request
        while pool:
            choice = self.chooser.choose(pool, req)
            if choice is None:
                return None
            node, gpus = choice
            if not req.gpus or req.is_share:
                return node, list(gpus)
            if not self.island_aware:
                gpus = node.choose_gpus(req, island_aware=False) or list(gpus)
            if ps.nvlink_required and not node.in_one_island(gpus):
                aware = node.choose_gpus(req)
                if aware is None or not node.in_one_island(aware):
                    pool = [s for s in pool if s is not node]
                    continue
                gpus = aware
            return node, list(gpus)
        return None

    # -- scopes -------------------------------------------------------------------------------

    def _scope(self, cand: Candidates, group: str | None) -> list[NodeState]:
        """The working states of ``cand``'s nodes (of product ``group``), indexed once per walk."""
        key = (id(cand), group)
        states = self.scopes.get(key)
        if states is None:
            states = self.scopes[key] = [
                self.state.by_name[n.name] for n in cand.nodes if group is None or n.product == group
            ]
            if self.distinct:
                self._register(key, states)
        return states

    def _register(self, key: Hashable, states: list[NodeState]) -> StateIndex:
        index = self.indexes[key] = StateIndex(states, self._key)
        for state in index.states:
            self.indexed.setdefault(state.name, []).append(index)
        return index

    def _refile(self, node: NodeState) -> None:
        for index in self.indexed.get(node.name, ()):
            index.refile(node)

    def _free_milli(self, cand: Candidates, product: str) -> int:
        """Free GPU compute on ``cand``'s nodes of ``product``."""
        states = self._scope(cand, product)
        index = self.indexes.get((id(cand), product))
        if index is not None:
            return index.free_gpu_milli()
        return sum(max(0, s.free_gpu_milli) for s in states)

    def _first_pool(self, ps: PodSet, cands: list[Candidates], allowed: set[str]) -> list[NodeState]:
        """What the chooser is offered for a gang's first pod over every allowed product."""
        key = ("first", tuple(id(c) for c in cands), tuple(sorted(allowed)))
        index = self.indexes.get(key)
        if index is None:
            in_order = [self.state.by_name[n.name] for c in cands for n in c.nodes if n.product in allowed]
            if not self.distinct:
                return RoomPool(in_order, room_check(ps)).offered()
            index = self._register(key, in_order)
        return index.offered(room_check(ps))

    def _domains(self, states: list[NodeState], levels: tuple[str, ...], level: str) -> _DomainGroups:
        """``states`` grouped by domain of ``level``, once per walk (the lists are the walk's own)."""
        key = (id(states), levels, level)
        found = self.domain_cache.get(key)
        if found is None:
            groups: dict[tuple[str, ...], list[NodeState]] = {}
            for state in states:
                domain = domain_of(self.nodes[state.name], levels, level)
                if domain is not None:
                    groups.setdefault(domain, []).append(state)
            found = self.domain_cache[key] = (states, list(groups.items()))
        return found[1]

    def _key(self, state: NodeState) -> Hashable:
        """A node's shape and free state: nodes with equal keys score the same."""
        key = self.keys.get(state.name)
        if key is None:
            key = self.keys[state.name] = (
                node_key(state),
                state.cpu_total,
                state.mem_total,
                tuple(state.islands),
            )
        return key
