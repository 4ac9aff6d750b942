"""Node filtering: which nodes each PodSet may use, and the count variables on them.

Eligibility is kube-scheduler's and Kueue's (``optsched.filtering.node_verdict``
per allowed flavor) plus what is free now: a node that cannot take even one
pod is dropped. On a large cluster a PodSet keeps a bounded candidate list so
the model stays small:

* the nodes the greedy BestFit plan and the previous plan used for it (so the
  optimizer can always reproduce them);
* the tightest partly used nodes (packing wants them filled first);
* a contiguous run of nodes in topology order (block, rack, name) that can host
  the gang several times over. Successive PodSets start where the previous
  one's demand ended, so the window of workloads covers the whole cluster and
  a gang's candidates share racks. A PodSet with a required topology level
  gets whole domains of that level that can host it alone.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable

from optsched.capacity.eligibility import flavors_of, node_verdict
from optsched.capacity.fit import pods_that_fit
from optsched.capacity.fragmentation import request_key
from optsched.capacity.state import NodeState
from optsched.model.names import HOSTNAME_LABEL
from optsched.model.snapshot import FULL_GPU_MILLI, PodSet, ResourceFlavor, Workload
from optsched.solver.context import ObjectiveTerm, PodSetEntry, SolverContext, WorkloadEntry


class NodeFiltering:
    """Creates the planning-window entries, candidate lists and ``y[podset, node]`` variables."""

    phase = "admission"
    name = "filtering"

    def __init__(self) -> None:
        self._eligible: dict[Hashable, list[int]] = {}
        self._ub: dict[Hashable, list[int]] = {}
        self._order: dict[Hashable, list[int]] = {}
        self._cursor: dict[Hashable, float] = {}
        self._domains: dict[Hashable, tuple[list[int], list[list[int]]]] = {}
        self._usable_cache: dict[Hashable, tuple[dict[int, str | None], list[int]]] = {}
        self._free: list[int] = []
        self._partial: list[bool] = []

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        newest = max((w.created for w in ctx.snapshot.workloads), default=None)
        for index, workload in enumerate(ctx.window):
            admit = ctx.model.new_bool_var(f"admit[{index}]")
            cq = None
            if workload.reservation is None:
                queue = ctx.snapshot.cluster_queue_of(workload)
                cq = queue.name if queue is not None else None
            age = (newest - workload.created).total_seconds() / 3600 if newest is not None else 0.0
            entry = WorkloadEntry(index, workload, admit, cluster_queue=cq, age_hours=max(0.0, age))
            for pod_set in workload.pod_sets:
                ps_entry = self._pod_set(ctx, entry, workload, pod_set)
                entry.pod_sets.append(ps_entry)
                ctx.pod_sets.append(ps_entry)
            ctx.workloads.append(entry)
        ctx.index_by_node()
        return []

    # -- eligibility ---------------------------------------------------------------------------

    def _signature(self, pod_set: PodSet) -> str:
        """What node eligibility depends on: everything but names, counts and topology."""
        return pod_set.model_copy(
            update={
                "name": "",
                "count": 1,
                "min_count": None,
                "required_topology": None,
                "preferred_topology": None,
                "allow_mixed_products": False,
            }
        ).model_dump_json()

    def _eligible_nodes(
        self, ctx: SolverContext, pod_set: PodSet, flavor: ResourceFlavor | None, signature: str
    ) -> list[int]:
        key = (flavor.model_dump_json() if flavor is not None else None, signature)
        if key not in self._eligible:
            self._eligible[key] = [
                i for i, node in enumerate(ctx.snapshot.nodes) if node_verdict(node, pod_set, flavor).ok
            ]
        return self._eligible[key]

    def _upper_bounds(self, ctx: SolverContext, pod_set: PodSet) -> list[int]:
        req = pod_set.request
        key = (request_key(req), pod_set.nvlink_required)
        if key not in self._ub:
            self._ub[key] = [
                pods_that_fit(n, req, nvlink_required=pod_set.nvlink_required) for n in ctx.nodes
            ]
        return self._ub[key]

    def _usable(
        self, ctx: SolverContext, pod_set: PodSet, flavors: list[ResourceFlavor | None]
    ) -> tuple[Hashable, dict[int, str | None], list[int]]:
        """Nodes that could take a pod now (-> first flavor accepting them) and the partly used ones."""
        signature = self._signature(pod_set)
        group = (tuple(f.name if f is not None else None for f in flavors), signature)
        if group not in self._usable_cache:
            ub_all = self._upper_bounds(ctx, pod_set)
            flavor_of: dict[int, str | None] = {}
            for flavor in flavors:
                for n in self._eligible_nodes(ctx, pod_set, flavor, signature):
                    if ub_all[n] > 0 and n not in flavor_of:
                        flavor_of[n] = flavor.name if flavor is not None else None
            partial = sorted((n for n in flavor_of if self._partial[n]), key=lambda n: (self._free[n], n))
            self._usable_cache[group] = (flavor_of, partial)
        flavor_of, partial = self._usable_cache[group]
        return group, flavor_of, partial

    def _pod_set(
        self, ctx: SolverContext, entry: WorkloadEntry, workload: Workload, pod_set: PodSet
    ) -> PodSetEntry:
        if not self._free:
            self._free = [n.free_gpu_milli for n in ctx.nodes]
            self._partial = [_partly_used(n) for n in ctx.nodes]
        flavors = flavors_of(ctx.snapshot, workload, pod_set)
        levels = ctx.levels_for(flavors[0] if flavors else None)
        ub_all = self._upper_bounds(ctx, pod_set)
        group, flavor_of, partial = self._usable(ctx, pod_set, flavors)
        required = pod_set.required_topology
        if required is not None:
            flavor_of = {n: f for n, f in flavor_of.items() if ctx.domain(n, levels, required) is not None}
        forced = {n for n in ctx.forced.get((workload.key, pod_set.name), set()) if n in flavor_of}
        chosen = self._select(ctx, pod_set, levels, flavor_of, partial, ub_all, forced, (group, required))
        nodes = sorted(chosen)
        ps_entry = PodSetEntry(
            index=len(ctx.pod_sets),
            workload=entry,
            pod_set=pod_set,
            nodes=nodes,
            flavors=[flavor_of[n] for n in nodes],
            ub=[min(pod_set.count, ub_all[n]) for n in nodes],
            levels=levels,
        )
        ps_entry.y = [
            ctx.model.new_int_var(0, ub, f"y[{ps_entry.index},{n}]")
            for n, ub in zip(nodes, ps_entry.ub, strict=True)
        ]
        return ps_entry

    # -- candidate pruning ---------------------------------------------------------------------

    def _select(
        self,
        ctx: SolverContext,
        pod_set: PodSet,
        levels: tuple[str, ...],
        usable: dict[int, str | None],
        partial: list[int],
        ub: list[int],
        forced: set[int],
        group: Hashable,
    ) -> set[int]:
        settings = ctx.settings
        limit = settings.candidates_per_podset
        if len(usable) <= max(limit, settings.min_candidates):
            return set(usable)
        ctx.pruned += 1
        count = pod_set.count
        want = settings.candidate_capacity_factor * count
        chosen = set(forced)

        if group not in self._order:
            self._order[group] = sorted(usable, key=lambda n: _topology_key(ctx, n, levels))
        order = self._order[group]
        # The tightest partly used nodes: packing fills them first.
        if pod_set.required_topology is None:
            chosen.update(partial[: max(2, limit // 4)])

        start = int(self._cursor.get(group, 0.0)) % len(order)
        capacity = sum(ub[n] for n in chosen)
        if pod_set.required_topology is not None:
            self._take_domains(ctx, pod_set, levels, order, start, ub, chosen, want, limit, group)
            return chosen
        consumed = 0.0
        covered = 0
        for step in range(len(order)):
            n = order[(start + step) % len(order)]
            if covered < count:
                covered += ub[n]
                consumed += 1.0 if covered <= count else 1.0 - (covered - count) / max(1, ub[n])
            if n in chosen:
                continue
            if len(chosen) >= limit or (capacity >= want and len(chosen) >= settings.min_candidates):
                break
            chosen.add(n)
            capacity += ub[n]
        self._cursor[group] = self._cursor.get(group, 0.0) + max(consumed, 1e-3)
        return chosen

    def _take_domains(
        self,
        ctx: SolverContext,
        pod_set: PodSet,
        levels: tuple[str, ...],
        order: list[int],
        start: int,
        ub: list[int],
        chosen: set[int],
        want: float,
        limit: int,
        group: Hashable,
    ) -> None:
        level = pod_set.required_topology
        assert level is not None
        if group not in self._domains:
            # Domains are contiguous in topology order; remember each one's first position.
            grouped: dict[tuple[str, ...] | None, list[int]] = {}
            for n in order:
                grouped.setdefault(ctx.domain(n, levels, level), []).append(n)
            position = {n: i for i, n in enumerate(order)}
            ordered = sorted(grouped.values(), key=lambda m: position[m[0]])
            self._domains[group] = ([position[m[-1]] for m in ordered], ordered)
        ends, domains = self._domains[group]
        first_at = bisect_left(ends, start) % len(domains)
        capacity = 0
        first = True
        for offset in range(len(domains)):
            members = domains[(first_at + offset) % len(domains)]
            room = sum(ub[n] for n in members)
            if room < pod_set.needed:
                continue
            members = sorted(members, key=lambda n: -ub[n])[: max(limit, 1)]
            chosen.update(members)
            capacity += sum(ub[n] for n in members)
            if first:
                self._cursor[group] = self._cursor.get(group, 0.0) + len(members)
                first = False
            if capacity >= want or len(chosen) >= 2 * limit:
                break


def _partly_used(node: NodeState) -> bool:
    healthy = sum(node.healthy) * FULL_GPU_MILLI
    return 0 < node.free_gpu_milli < healthy


def _topology_key(ctx: SolverContext, n: int, levels: tuple[str, ...]) -> tuple[str, ...]:
    node = ctx.node(n)
    return (*(node.labels.get(level, "") for level in levels if level != HOSTNAME_LABEL), node.name)
