"""The shared state the model modules build on.

The solver is a CP-SAT model assembled by small modules (``optsched.solver.modules``),
each adding constraints to one :class:`SolverContext` and returning
:class:`ObjectiveTerm` values tagged with a lexicographic stage. The context
holds the problem facts (the planning window, candidate nodes, free capacity)
and the decision variables other modules need to refer to.

Decision variables are aggregated so the model stays small on large clusters:
pods of one PodSet are identical, so ``y[podset, node]`` is the *number* of its
pods on a node rather than one Boolean per pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from optsched.capacity.state import ClusterState, NodeState
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, PodRequest, PodSet, ResourceFlavor, Snapshot, Workload
from optsched.settings import Settings
from optsched.solver.clock import SearchClock
from optsched.topology.domains import domain_of

LinearExpr = cp_model.LinearExprT


class HintView:
    """Values of a known solution (the greedy plan, or an earlier stage) while deriving a full hint."""

    def __init__(self, values: dict[int, int], gpus: dict[tuple[int, int], list[tuple[int, ...]]]) -> None:
        self.values = values
        self.gpus = gpus
        """(PodSet index, node index) -> GPU indices of the known solution's pods there (greedy only)."""

    def __call__(self, var: cp_model.IntVar) -> int:
        return self.values.get(var.index, 0)

    def linear(self, variables: list[cp_model.IntVar], coefs: list[int]) -> int:
        return sum(c * self.values.get(v.index, 0) for v, c in zip(variables, coefs, strict=True))


HintRule = Callable[[HintView], int]


def any_of(variables: list[cp_model.IntVar]) -> HintRule:
    """Rule: 1 when any of ``variables`` is positive (a "used" indicator)."""

    def rule(h: HintView) -> int:
        return int(any(h(v) for v in variables))

    return rule


@dataclass(frozen=True)
class ObjectiveTerm:
    """One part of a stage objective; terms with the same stage are summed."""

    stage: str
    """Stage name as reported in the plan, e.g. ``priority:1000`` or ``topology``."""
    rank: tuple[int, int]
    """Lexicographic position: lower ranks are optimised first."""
    expr: LinearExpr
    maximize: bool = False
    scale: float = 1.0
    """Divide the stage value by this to report it in natural units (GPUs)."""


@dataclass(eq=False)
class WorkloadEntry:
    """A workload inside the planning window and its admission variable."""

    index: int
    workload: Workload
    admit: cp_model.IntVar
    pod_sets: list[PodSetEntry] = field(default_factory=list)
    cluster_queue: str | None = None
    """The ClusterQueue whose quota applies (None where no quota applies)."""
    age_hours: float = 0.0


@dataclass(eq=False)
class PodSetEntry:
    """One PodSet: its candidate nodes and the count variables ``y`` per candidate."""

    index: int
    workload: WorkloadEntry
    pod_set: PodSet
    nodes: list[int]
    """Indices into :attr:`SolverContext.nodes`, ascending."""
    flavors: list[str | None]
    """Flavor name per candidate node (the first allowed flavor that accepts the node)."""
    ub: list[int]
    """Most pods of this PodSet each candidate node could take on its own."""
    y: list[cp_model.IntVar] = field(default_factory=list)
    levels: tuple[str, ...] = ()
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

    def total(self) -> LinearExpr:
        return sum(self.y, start=0) if self.y else 0


@dataclass
class SolverContext:
    """Problem facts plus the model under construction."""

    snapshot: Snapshot
    settings: Settings
    state: ClusterState
    previous: Plan | None
    model: cp_model.CpModel
    window: list[Workload] = field(default_factory=list)
    """Workloads planned jointly, in queue order (priority desc, creation asc)."""
    forced: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    """(workload key, PodSet name) -> nodes that must stay candidates (greedy and previous plan)."""
    workloads: list[WorkloadEntry] = field(default_factory=list)
    pod_sets: list[PodSetEntry] = field(default_factory=list)
    beyond_window: list[Workload] = field(default_factory=list)
    share_vars: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = field(default_factory=dict)
    """(PodSet, node) -> (index of a partly used GPU, pods of the PodSet sharing it)."""
    fresh_slots: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)
    """Node -> one Boolean per untouched GPU that shares may open (ordered: slot j used implies j-1)."""
    fresh_share_vars: dict[tuple[int, int], list[cp_model.IntVar]] = field(default_factory=dict)
    """(PodSet, node) -> pods per untouched-GPU slot."""
    island_counts: dict[tuple[int, int, int], cp_model.IntVar] = field(default_factory=dict)
    """(node, island, pod GPU size) -> pods of that size placed wholly inside the island."""
    by_node: dict[int, list[tuple[PodSetEntry, int]]] = field(default_factory=dict)
    """Node -> (PodSet, position of the node in the PodSet's candidate list)."""
    notes: list[str] = field(default_factory=list)
    hint_rules: list[tuple[cp_model.IntVar, HintRule]] = field(default_factory=list)
    """Auxiliary variables and how to derive their value from y/admit (applied in order)."""
    pruned: int = 0
    """PodSets whose candidate nodes were cut to a bounded list."""
    known_optimum: dict[str, int] = field(default_factory=dict)
    """Stage name -> optimum known without solving (leading priority levels the greedy plan admits whole)."""
    active: set[int] | None = None
    """Admitted workload indices once the admission stages are solved (None: all are open)."""
    island_nodes: set[int] = field(default_factory=set)
    """Nodes whose NVLink island counts are already modelled."""
    clock: SearchClock = field(init=False)
    """The unit of the search budget: wall-clock seconds unless the settings ask for deterministic time."""
    _domains: dict[tuple[int, tuple[str, ...], str], tuple[str, ...] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.clock = SearchClock(self.settings.deterministic_time)

    @property
    def nodes(self) -> list[NodeState]:
        return self.state.nodes

    def node(self, index: int) -> Node:
        return self.snapshot.nodes[index]

    def derive(self, var: cp_model.IntVar, rule: HintRule) -> None:
        """Register how an auxiliary variable follows from the placement, for complete hints."""
        self.hint_rules.append((var, rule))

    def is_active(self, entry: WorkloadEntry) -> bool:
        return self.active is None or entry.index in self.active

    def index_by_node(self) -> None:
        """Map nodes to the PodSets that may use them (admitted ones only, once admission is fixed)."""
        self.by_node = {}
        for entry in self.pod_sets:
            if not self.is_active(entry.workload):
                continue
            for pos, n in enumerate(entry.nodes):
                self.by_node.setdefault(n, []).append((entry, pos))

    def levels_for(self, flavor: ResourceFlavor | None) -> tuple[str, ...]:
        """Topology levels for a flavor: its Topology, else the settings' override, else the defaults."""
        if flavor is not None and flavor.topology_name and self.snapshot.topology(flavor.topology_name):
            return self.snapshot.topology_levels_for(flavor)
        if self.settings.topology_levels is not None:
            return self.settings.topology_levels
        return self.snapshot.default_topology_levels

    def domain(self, node_index: int, levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
        """The node's domain path down to ``level`` (as Kueue TAS names it); None if unlabelled."""
        key = (node_index, levels, level)
        if key not in self._domains:
            self._domains[key] = domain_of(self.node(node_index), levels, level)
        return self._domains[key]

    def whole_gpu_terms(self, node_index: int) -> list[tuple[int, cp_model.IntVar]]:
        """(GPUs per pod, count var) of whole-GPU pods that may land on a node."""
        out = []
        for entry, pos in self.by_node.get(node_index, []):
            if entry.whole_gpus:
                out.append((entry.whole_gpus, entry.y[pos]))
        return out
