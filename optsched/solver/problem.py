"""The problem the model is built for, as one value computed before any variable exists.

Everything the model modules need to know about the cluster and the queue is
decided here, once: the planning window (:mod:`optsched.solver.window`), each
workload's ClusterQueue and age, and each PodSet's candidate nodes with the
flavor that accepts them and how many of its pods fit there
(:mod:`optsched.solver.candidates`). Keeping the facts apart from the
decision variables (:mod:`optsched.solver.variables`) lets a test build a
tiny problem, add one module and check its constraints, and lets every
module read the same facts without recomputing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from optsched.capacity.baseline import Baseline
from optsched.capacity.eligibility import flavors_of
from optsched.capacity.mig_room import mig_headroom
from optsched.capacity.state import ClusterState, NodeState
from optsched.kueue.quota import QuotaLedger
from optsched.model.placement import Placement
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, PodRequest, PodSet, ResourceFlavor, Snapshot, Workload
from optsched.settings import Settings
from optsched.solver.candidates import CandidateFinder, Option
from optsched.solver.window import choose_window
from optsched.topology.domains import domain_of


@dataclass(frozen=True, eq=False)
class PlannedPodSet:
    """One PodSet of a workload in the window, with its candidate nodes."""

    index: int
    """Position among all planned PodSets."""
    owner: int
    """Index of its :class:`PlannedWorkload`."""
    pod_set: PodSet
    options: tuple[Option, ...]
    """Candidate nodes, ascending by node index."""
    levels: tuple[str, ...]
    """Topology levels (coarsest first) that apply to this PodSet's flavor."""

    @property
    def request(self) -> PodRequest:
        return self.pod_set.request

    @property
    def is_share(self) -> bool:
        return self.pod_set.request.is_share

    @property
    def whole_gpus(self) -> int:
        """Whole GPUs per pod (0 for shares and CPU-only pods)."""
        req = self.pod_set.request
        return 0 if req.is_share else req.gpus


@dataclass(frozen=True, eq=False)
class PlannedWorkload:
    """A workload inside the planning window."""

    index: int
    workload: Workload
    pod_sets: tuple[PlannedPodSet, ...]
    cluster_queue: str | None
    """The ClusterQueue whose quota applies (None where no quota applies)."""
    age_hours: float
    """Hours since creation, counted from the newest pending workload."""


class Domains:
    """Topology levels per flavor and each node's domain path, looked up once each.

    Candidate pruning and the topology modules ask for the same domains many
    times on a large cluster.
    """

    def __init__(self, snapshot: Snapshot, settings: Settings) -> None:
        self._snapshot = snapshot
        self._override = settings.topology_levels
        self._cache: dict[tuple[int, tuple[str, ...], str], tuple[str, ...] | None] = {}

    def levels_for(self, flavor: ResourceFlavor | None) -> tuple[str, ...]:
        """Topology levels for a flavor: its Topology, else the settings' override, else the defaults."""
        snapshot = self._snapshot
        if flavor is not None and flavor.topology_name and snapshot.topology(flavor.topology_name):
            return snapshot.topology_levels_for(flavor)
        if self._override is not None:
            return self._override
        return snapshot.default_topology_levels

    def of(self, node_index: int, levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
        """The node's domain path down to ``level`` (as Kueue TAS names it); None if unlabelled."""
        key = (node_index, levels, level)
        if key not in self._cache:
            self._cache[key] = domain_of(self._snapshot.nodes[node_index], levels, level)
        return self._cache[key]


@dataclass(frozen=True, eq=False)
class Problem:
    """The facts of one solve: snapshot, settings, free capacity, and the planned workloads.

    Nothing changes it once built: modules read the cluster state, and the GPU
    assignment works on copies of its nodes.
    """

    snapshot: Snapshot
    settings: Settings
    state: ClusterState
    ledger: QuotaLedger
    """Quota usage the snapshot shows (read, never changed: the model adds the new admissions)."""
    previous: Plan | None
    workloads: tuple[PlannedWorkload, ...]
    domains: Domains
    beyond_window: tuple[Workload, ...] = ()
    pruned: int = 0
    """PodSets whose candidate nodes were cut to a bounded list."""
    mig_headroom: dict[int, dict[str, int]] = field(default_factory=dict)
    """Node index -> MIG instances per resource a new layout could add; :attr:`nodes` count them as
    free, so a node's real free instances are its ``ext`` minus these."""

    @cached_property
    def pod_sets(self) -> tuple[PlannedPodSet, ...]:
        return tuple(ps for w in self.workloads for ps in w.pod_sets)

    @property
    def nodes(self) -> list[NodeState]:
        return self.state.nodes

    def node(self, index: int) -> Node:
        return self.snapshot.nodes[index]

    def domain(self, node_index: int, levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
        return self.domains.of(node_index, levels, level)


def build_problem(
    snapshot: Snapshot,
    settings: Settings,
    greedy: Placement,
    previous: Plan | None = None,
    *,
    baseline: Baseline | None = None,
) -> Problem:
    """The window and every PodSet's candidates; ``greedy``'s nodes always stay candidates."""
    base = Baseline.reuse(snapshot, baseline)
    headroom = _mig_headroom(snapshot)
    state = _with_headroom(base.state, headroom) if headroom else base.state
    window = choose_window(snapshot, settings, state, greedy, previous, _unplaceable(snapshot, base))
    domains = Domains(snapshot, settings)
    finder = CandidateFinder(snapshot, settings, state, domains.of, base.eligibility)
    newest = max((w.created for w in snapshot.workloads), default=None)
    workloads: list[PlannedWorkload] = []
    count = 0
    for index, workload in enumerate(window.workloads):
        cq = None
        if workload.reservation is None:
            queue = snapshot.cluster_queue_of(workload)
            cq = queue.name if queue is not None else None
        age = (newest - workload.created).total_seconds() / 3600 if newest is not None else 0.0
        pod_sets = []
        for pod_set in workload.pod_sets:
            flavors = flavors_of(snapshot, workload, pod_set)
            levels = domains.levels_for(flavors[0] if flavors else None)
            forced = window.forced.get((workload.key, pod_set.name), frozenset())
            options = finder.options(pod_set, flavors, levels, forced)
            pod_sets.append(PlannedPodSet(count, index, pod_set, options, levels))
            count += 1
        workloads.append(PlannedWorkload(index, workload, tuple(pod_sets), cq, max(0.0, age)))
    return Problem(
        snapshot,
        settings,
        state,
        base.ledger,
        previous,
        tuple(workloads),
        domains,
        beyond_window=window.beyond,
        pruned=finder.pruned,
        mig_headroom=headroom,
    )


def _mig_headroom(snapshot: Snapshot) -> dict[int, dict[str, int]]:
    """Node index -> MIG instances a new layout could add, where a pending pod asks for MIG at all."""
    if not any(ps.request.extended for w in snapshot.workloads for ps in w.pod_sets):
        return {}
    rooms = {n: mig_headroom(node) for n, node in enumerate(snapshot.nodes) if node.mig_gpus}
    return {n: room for n, room in rooms.items() if room}


def _with_headroom(state: ClusterState, headroom: dict[int, dict[str, int]]) -> ClusterState:
    """A copy of ``state`` whose nodes count the MIG headroom as free: candidates and upper bounds
    see every node a new layout could serve; the layout module holds pods to the layouts chosen."""
    nodes = list(state.nodes)
    for n, room in headroom.items():
        node = nodes[n].copy()
        for name, extra in room.items():
            node.ext[name] = node.ext.get(name, 0) + extra
        nodes[n] = node
    return ClusterState(nodes)


def _unplaceable(snapshot: Snapshot, base: Baseline) -> set[str]:
    """Workloads with a PodSet that no node passes the filters for: too large, or no node matches."""
    return {
        w.key
        for w in snapshot.workloads
        if any(not any(c.nodes for c in base.eligibility.get(w, ps)) for ps in w.pod_sets)
    }
