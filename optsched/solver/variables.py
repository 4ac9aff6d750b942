"""The decision variables, in containers that answer questions instead of parallel lists.

Decision variables are aggregated so the model stays small on large clusters:
pods of one PodSet are identical, so ``y[podset, node]`` is the *number* of its
pods on a node rather than one Boolean per pod, and ``admit[workload]`` says
whether the workload is admitted. Each count lives in a :class:`Candidate`
next to the node, flavor and upper bound it belongs to, so no module indexes
one list by a position found in another.

Two modules create variables that others read: node capacity the GPU-share
variables (:class:`ShareVars`, read by packing and the GPU assignment) and the
NVLink modules the island counts (:class:`IslandVars`, read by the NVLink
preference and the GPU assignment). Each has its own typed container here, so
a reader depends on the variables, not on the module that made them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ortools.sat.python import cp_model

from optsched.model.snapshot import PodRequest, PodSet, Workload
from optsched.solver.mig_vars import MigVars
from optsched.solver.problem import PlannedPodSet, PlannedWorkload, Problem

LinearExpr = cp_model.LinearExprT


@dataclass(frozen=True, eq=False)
class Candidate:
    """One node a PodSet may use and the count of its pods there."""

    node: int
    flavor: str | None
    ub: int
    """Most pods of the PodSet this node could take on its own."""
    y: cp_model.IntVar
    """Pods of the PodSet placed on the node."""


@dataclass(frozen=True, eq=False)
class PodSetVars:
    """A PodSet's counts, one per candidate node (ascending by node)."""

    planned: PlannedPodSet
    owner: PlannedWorkload
    admit: cp_model.IntVar
    """The owning workload's admission variable."""
    candidates: tuple[Candidate, ...]

    @property
    def index(self) -> int:
        return self.planned.index

    @property
    def pod_set(self) -> PodSet:
        return self.planned.pod_set

    @property
    def workload(self) -> Workload:
        return self.owner.workload

    @property
    def request(self) -> PodRequest:
        return self.planned.request

    @property
    def is_share(self) -> bool:
        return self.planned.is_share

    @property
    def whole_gpus(self) -> int:
        """Whole GPUs per pod (0 for shares and CPU-only pods)."""
        return self.planned.whole_gpus

    @property
    def levels(self) -> tuple[str, ...]:
        return self.planned.levels

    @property
    def ys(self) -> list[cp_model.IntVar]:
        return [c.y for c in self.candidates]

    def total(self) -> LinearExpr:
        """Pods placed, over every candidate."""
        return sum(self.ys, start=0) if self.candidates else 0

    def on(self, node: int) -> Candidate | None:
        """The (first) candidate on ``node``, if the PodSet may use it."""
        found = self._by_node.get(node)
        return found[0] if found else None

    def all_on(self, node: int) -> list[Candidate]:
        """Every candidate on ``node``: one per allowed flavor that accepts it."""
        return self._by_node.get(node, [])

    def pods_on(self, node: int) -> LinearExpr:
        """Pods of the PodSet on ``node``, whatever the flavor."""
        ys = [c.y for c in self.all_on(node)]
        return ys[0] if len(ys) == 1 else sum(ys, start=0)

    @cached_property
    def _by_node(self) -> dict[int, list[Candidate]]:
        out: dict[int, list[Candidate]] = {}
        for c in self.candidates:
            out.setdefault(c.node, []).append(c)
        return out

    def label(self) -> str:
        return f"{self.workload.key} podset {self.pod_set.name}"


@dataclass(frozen=True, eq=False)
class WorkloadVars:
    """A workload of the window: its admission variable and its PodSets."""

    planned: PlannedWorkload
    admit: cp_model.IntVar
    pod_sets: tuple[PodSetVars, ...]

    @property
    def index(self) -> int:
        return self.planned.index

    @property
    def workload(self) -> Workload:
        return self.planned.workload


class ShareVars:
    """Node capacity's GPU-share variables: which GPU each share of a PodSet uses on a node.

    Partly used GPUs get a count per GPU index; untouched GPUs are opened as
    interchangeable slots (a Boolean each), with a count per slot.
    """

    def __init__(self) -> None:
        self._slots: dict[int, list[cp_model.IntVar]] = {}
        self._on_gpu: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}
        self._fresh: dict[tuple[int, int], list[cp_model.IntVar]] = {}

    def add_slots(self, node: int, slots: list[cp_model.IntVar]) -> None:
        self._slots[node] = slots

    def add_pod_set(
        self,
        pod_set: int,
        node: int,
        on_gpu: list[tuple[int, cp_model.IntVar]],
        fresh: list[cp_model.IntVar],
    ) -> None:
        self._on_gpu[(pod_set, node)] = on_gpu
        self._fresh[(pod_set, node)] = fresh

    def slots(self, node: int) -> list[cp_model.IntVar]:
        """One Boolean per untouched GPU shares may open (ordered: slot j used implies j-1)."""
        return self._slots.get(node, [])

    def on_gpu(self, pod_set: int, node: int) -> list[tuple[int, cp_model.IntVar]]:
        """(index of a partly used GPU, pods of the PodSet sharing it)."""
        return self._on_gpu.get((pod_set, node), [])

    def fresh(self, pod_set: int, node: int) -> list[cp_model.IntVar]:
        """Pods of the PodSet per untouched-GPU slot."""
        return self._fresh.get((pod_set, node), [])


@dataclass(eq=False)
class IslandNode:
    """One multi-island node as the NVLink modules modelled it."""

    node: int
    sizes: dict[int, list[tuple[PodSetVars, Candidate]]]
    """Pod GPU size (2 up to the largest island) -> the PodSets of that size that may use the node."""
    known: bool
    """Whether the node's free GPUs are known by index (else nobody knows which islands are free)."""
    counts: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    """(island, pod GPU size) -> pods of that size placed wholly inside the island."""
    counted: bool = False
    """Whether in-island counts were modelled (a node can be known and still not need them)."""

    def inside(self, size: int) -> list[cp_model.IntVar]:
        return [var for (_, g), var in self.counts.items() if g == size]


class IslandVars:
    """The NVLink island counts, node by node in the order they were modelled."""

    def __init__(self) -> None:
        self._nodes: dict[int, IslandNode] = {}

    def add(self, node: IslandNode) -> None:
        self._nodes[node.node] = node

    def modelled(self, node: int) -> bool:
        return node in self._nodes

    def nodes(self) -> list[IslandNode]:
        return list(self._nodes.values())

    def count(self, node: int, island: int, size: int) -> cp_model.IntVar | None:
        """Pods of ``size`` GPUs placed wholly inside ``island`` of ``node`` (None: not modelled)."""
        modelled = self._nodes.get(node)
        return modelled.counts.get((island, size)) if modelled is not None else None


class Variables:
    """Every admission and count variable of one model, with the questions modules ask of them."""

    def __init__(self, problem: Problem, model: cp_model.CpModel) -> None:
        self.problem = problem
        workloads = []
        for planned in problem.workloads:
            admit = model.new_bool_var(f"admit[{planned.index}]")
            pod_sets = tuple(
                PodSetVars(ps, planned, admit, _candidates(model, ps)) for ps in planned.pod_sets
            )
            workloads.append(WorkloadVars(planned, admit, pod_sets))
        self.workloads: tuple[WorkloadVars, ...] = tuple(workloads)
        self.pod_sets: tuple[PodSetVars, ...] = tuple(ps for w in workloads for ps in w.pod_sets)
        self.shares = ShareVars()
        self.islands = IslandVars()
        self.mig = MigVars()
        self._active: frozenset[int] | None = None
        self._by_node = self._index()

    # -- queries -------------------------------------------------------------------------------

    @property
    def by_node(self) -> Mapping[int, list[tuple[PodSetVars, Candidate]]]:
        """Node -> the PodSets that may use it (admitted ones only, once admission is fixed).

        Nodes come in the order the PodSets first name them.
        """
        return self._by_node

    def on_node(self, node: int) -> list[tuple[PodSetVars, Candidate]]:
        return self._by_node.get(node, [])

    def whole_gpu_terms(self, node: int) -> list[tuple[int, cp_model.IntVar]]:
        """(GPUs per pod, count var) of whole-GPU pods that may land on a node."""
        return [(ps.whole_gpus, c.y) for ps, c in self.on_node(node) if ps.whole_gpus]

    def is_active(self, workload: WorkloadVars) -> bool:
        """Whether the workload may still be admitted (all are, until admission is fixed)."""
        return self._active is None or workload.index in self._active

    def workload(self, key: str) -> WorkloadVars:
        for entry in self.workloads:
            if entry.workload.key == key:
                return entry
        raise KeyError(f"workload {key} is not in the planning window")

    def pod_set(self, key: str, name: str) -> PodSetVars:
        for ps in self.workload(key).pod_sets:
            if ps.pod_set.name == name:
                return ps
        raise KeyError(f"workload {key} has no PodSet {name}")

    # -- changes -------------------------------------------------------------------------------

    def keep_admitted(self, admitted: set[int]) -> None:
        """From now on only these workloads (by index) are modelled further."""
        self._active = frozenset(admitted)
        self._by_node = self._index()

    def fix(
        self,
        model: cp_model.CpModel,
        admit: Mapping[str, bool] | None = None,
        pods: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
    ) -> None:
        """Pin variables to a known placement (for tests).

        ``admit`` maps workload keys to admitted or not; ``pods`` maps
        (workload key, PodSet name) to pods per node name, and every other
        candidate of that PodSet gets none. A node that is not a candidate is
        an error: a test that expects it to be left out asks :meth:`PodSetVars.on`.
        """
        for key, admitted in (admit or {}).items():
            model.add(self.workload(key).admit == int(admitted))
        index = {node.name: i for i, node in enumerate(self.problem.snapshot.nodes)}
        for (key, name), counts in (pods or {}).items():
            ps = self.pod_set(key, name)
            for node_name in counts:
                if ps.on(index[node_name]) is None:
                    raise ValueError(f"node {node_name} is not a candidate of {ps.label()}")
            placed: set[int] = set()
            for candidate in ps.candidates:
                # A node several flavors accept gets the pods on its first flavor.
                first = candidate.node not in placed
                placed.add(candidate.node)
                count = counts.get(self.problem.node(candidate.node).name, 0) if first else 0
                model.add(candidate.y == count)

    def _index(self) -> dict[int, list[tuple[PodSetVars, Candidate]]]:
        by_node: dict[int, list[tuple[PodSetVars, Candidate]]] = {}
        for workload in self.workloads:
            if not self.is_active(workload):
                continue
            for ps in workload.pod_sets:
                for candidate in ps.candidates:
                    by_node.setdefault(candidate.node, []).append((ps, candidate))
        return by_node


def _candidates(model: cp_model.CpModel, ps: PlannedPodSet) -> tuple[Candidate, ...]:
    out: list[Candidate] = []
    for o in ps.options:
        again = bool(out) and out[-1].node == o.node
        name = f"y[{ps.index},{o.node},{o.flavor}]" if again else f"y[{ps.index},{o.node}]"
        out.append(Candidate(o.node, o.flavor, o.ub, model.new_int_var(0, o.ub, name)))
    return tuple(out)
