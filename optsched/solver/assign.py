"""From solver counts to concrete pods and GPU indices.

The model decides how many pods of each PodSet go on each node, how many of
them sit wholly inside each NVLink island, and which GPU (or untouched GPU
slot) each share uses. Here those counts become pods with indices, node by
node, deterministically:

1. pods the model placed inside an island take that island's free GPUs
   (``nvlink: required`` PodSets first);
2. the remaining whole-GPU pods, biggest first, take GPUs through
   :meth:`NodeState.choose_gpus` (tightest island that holds them, else fewest
   islands);
3. shares go on the partly used GPU the model chose, or on the untouched GPUs
   left over, slot by slot (left to the node where in-use GPUs have unknown
   indices); a pod of N shares gets N of them, dealt out so no pod gets one
   GPU twice.

The model's constraints guarantee every step succeeds; if one does not, the
model and this code disagree, which is a bug, so it raises instead of
returning a plan that cannot be realised. On a node with index-unknown usage,
whole-GPU pods and shares on untouched GPUs get ``gpus=None``.

Last, on device-plugin nodes the whole-GPU pods take the GPUs NVIDIA's device
plugin will give them (:func:`optsched.capacity.prediction.predict_placement`),
steps 1-2's indices standing as the island promise that prediction keeps.
"""

from __future__ import annotations

from collections.abc import Callable

from ortools.sat.python import cp_model

from optsched.capacity.prediction import predict_placement
from optsched.capacity.state import NodeState
from optsched.mig.layout import resource_name
from optsched.model.placement import Placement, PodPlacement, WorkloadAssignment
from optsched.solver.variables import PodSetVars, Variables

Value = Callable[[cp_model.IntVar], int]
Pod = tuple[str, tuple[int, ...] | None]
"""One pod as the node-by-node assignment makes it: node and GPU indices (its index comes last)."""
Pods = dict[PodSetVars, list[Pod]]


class AssignmentError(RuntimeError):
    """The solver's counts could not be turned into GPU indices (a model bug)."""


def build_placement(variables: Variables, value: Value) -> Placement:
    """The placement a solution describes, with GPU indices; ``value`` reads the solution."""
    placement = Placement()
    pods: dict[int, list[Pod]] = {}
    on_node: dict[int, dict[PodSetVars, int]] = {}
    admitted = {entry.index for entry in variables.workloads if value(entry.admit)}
    for ps in variables.pod_sets:
        if ps.owner.index not in admitted:
            continue
        pods[ps.index] = []
        for c in ps.candidates:
            count = value(c.y)
            if count:
                # A node several flavors accept has one count per flavor; its pods are one group.
                here = on_node.setdefault(c.node, {})
                here[ps] = here.get(ps, 0) + count
    for n in sorted(on_node):
        for ps, assigned in _Node(variables, n, value).assign(list(on_node[n].items())).items():
            pods[ps.index].extend(assigned)
    for entry in variables.workloads:
        if entry.index not in admitted:
            continue
        assignment = WorkloadAssignment()
        for ps in entry.pod_sets:
            assignment.pods[ps.pod_set.name] = [
                PodPlacement(index=i, node=node, gpus=gpus) for i, (node, gpus) in enumerate(pods[ps.index])
            ]
            used = [c.flavor for c in ps.candidates if value(c.y)]
            first = ps.candidates[0].flavor if ps.candidates else None
            assignment.flavors[ps.pod_set.name] = used[0] if used else first
        placement.admitted[entry.workload.key] = assignment
    start = {state.name: state for state in variables.problem.nodes}
    predicted = predict_placement(placement, (entry.workload for entry in variables.workloads), start)
    predicted.mig_layouts = mig_layouts(variables, value)
    return predicted


def mig_layouts(variables: Variables, value: Value) -> dict[tuple[str, int], tuple[tuple[str, int], ...]]:
    """(node, GPU) -> the chosen ``(profile, start)`` instances, for every GPU whose layout changes."""
    out = {}
    nodes = variables.problem.snapshot.nodes
    for g in variables.mig.gpus:
        chosen = g.chosen(value)
        if chosen != g.gpu.layout:
            out[(nodes[g.node].name, g.gpu.index)] = chosen
    return out


class _Node:
    """The pods one node receives, given GPU indices in the three steps of the module docstring."""

    def __init__(self, variables: Variables, n: int, value: Value) -> None:
        self.vars = variables
        self.n = n
        self.value = value
        self.start = variables.problem.nodes[n]
        self.state = self.start.copy()
        self.name = self.state.name
        self._mig_capacity()

    def _mig_capacity(self) -> None:
        """MIG instances as the chosen layouts leave them (the problem's nodes count the headroom)."""
        ext = self.state.ext
        for name, extra in self.vars.problem.mig_headroom.get(self.n, {}).items():
            ext[name] = ext.get(name, 0) - extra
        for g in self.vars.mig.on_node(self.n):
            for p in g.placements:
                name = resource_name(p.profile)
                ext[name] = ext.get(name, 0) + self.value(p.var) - int(p.current)

    def assign(self, items: list[tuple[PodSetVars, int]]) -> Pods:
        out: Pods = {ps: [] for ps, _ in items}
        remaining = {ps: count for ps, count in items if ps.whole_gpus}
        if self.state.indices_known:
            self._in_islands(remaining, out)
            self._whole(remaining, out)
        else:
            self._whole_unknown(remaining, out)
        self._shares(items, out)
        _check(self.state, self.start)
        return out

    def _place(self, ps: PodSetVars, gpus: list[int], out: Pods, pod: tuple[int, ...] | None) -> None:
        self.state.take(ps.request, gpus)
        out[ps].append((self.name, pod))

    def _in_islands(self, remaining: dict[PodSetVars, int], out: Pods) -> None:
        """1. In-island pods, per island and size, as the model counted them."""
        state = self.state
        for i, island in enumerate(state.islands):
            for g in sorted({ps.whole_gpus for ps in remaining}, reverse=True):
                var = self.vars.islands.count(self.n, i, g)
                inside = self.value(var) if var is not None else 0
                for _ in range(inside):
                    ps = _next_pod(remaining, g)
                    free = [gpu for gpu in island if state.is_fully_free(gpu)]
                    if ps is None or len(free) < g:
                        raise AssignmentError(
                            f"node {self.name}: island {i} cannot hold the {g}-GPU pods counted in it"
                        )
                    gpus = free[:g]
                    self._place(ps, gpus, out, tuple(gpus))
                    remaining[ps] -= 1

    def _whole(self, remaining: dict[PodSetVars, int], out: Pods) -> None:
        """2. The other whole-GPU pods, biggest first."""
        state = self.state
        for ps in sorted(remaining, key=lambda p: (-p.whole_gpus, p.index)):
            for _ in range(remaining[ps]):
                chosen = state.choose_gpus(ps.request)
                if chosen is None:
                    raise AssignmentError(
                        f"node {self.name}: no {ps.whole_gpus} free GPUs left for {ps.label()}"
                    )
                if ps.pod_set.nvlink_required and not state.in_one_island(chosen):
                    raise AssignmentError(f"node {self.name}: {ps.label()} needs one NVLink island")
                self._place(ps, chosen, out, tuple(chosen))

    def _whole_unknown(self, remaining: dict[PodSetVars, int], out: Pods) -> None:
        """Whole-GPU pods on a node with index-unknown usage: counted, without indices."""
        whole = sum(ps.whole_gpus * count for ps, count in remaining.items())
        if whole > self.state.whole_free:
            raise AssignmentError(
                f"node {self.name}: {whole} whole GPUs placed, {self.state.whole_free} free"
            )
        for ps, count in remaining.items():
            for _ in range(count):
                self._place(ps, [], out, None)

    def _shares(self, items: list[tuple[PodSetVars, int]], out: Pods) -> None:
        """3. Shares: on the partly used GPU the model chose, or on an untouched GPU per opened slot."""
        state, value, shares = self.state, self.value, self.vars.shares
        opened = sum(value(t) for t in shares.slots(self.n))
        known = state.indices_known
        untouched = sorted(state.fully_free_gpus(), key=lambda g: (_island_free(state, g), g))
        room = len(untouched) if known else state.whole_free
        if opened > room:
            raise AssignmentError(f"node {self.name}: shares opened {opened} GPUs, {room} untouched")
        for ps, count in items:
            if not ps.is_share:
                if not ps.whole_gpus:
                    for _ in range(count):
                        self._place(ps, [], out, ())
                continue
            if not known and ps.request.gpus == 1:
                fresh_pods = sum(value(var) for var in shares.fresh(ps.index, self.n))
                for _ in range(fresh_pods):
                    self._place(ps, [], out, None)
                count -= fresh_pods
                dealt = [gpu for gpu, var in shares.on_gpu(ps.index, self.n) for _ in range(value(var))]
            else:
                # One entry per share, GPU by GPU: dealt out round-robin, no pod gets a GPU twice
                # (the model puts at most ``count`` shares of the PodSet on any GPU).
                dealt = [gpu for gpu, var in shares.on_gpu(ps.index, self.n) for _ in range(value(var))]
                fresh = shares.fresh(ps.index, self.n)
                dealt += [untouched[j] for j, var in enumerate(fresh) for _ in range(value(var))]
            per_pod = ps.request.gpus
            if len(dealt) != count * per_pod:
                raise AssignmentError(
                    f"node {self.name}: {ps.label()} has {count} pods of {per_pod} shares, "
                    f"the model placed {len(dealt)} shares"
                )
            for pod in range(count):
                gpus = sorted(dealt[pod::count])
                if len(set(gpus)) != per_pod:
                    raise AssignmentError(f"node {self.name}: {ps.label()} would get GPU {gpus} twice")
                self._place(ps, gpus, out, tuple(gpus))


def _next_pod(remaining: dict[PodSetVars, int], g: int) -> PodSetVars | None:
    sized = [ps for ps, left in remaining.items() if ps.whole_gpus == g and left > 0]
    sized.sort(key=lambda ps: (not ps.pod_set.nvlink_required, ps.index))
    return sized[0] if sized else None


def _island_free(state: NodeState, gpu: int) -> int:
    for island in state.islands:
        if gpu in island:
            return sum(1 for g in island if state.is_fully_free(g))
    return 0


def _check(state: NodeState, start: NodeState) -> None:
    """Raise if the node's pods over-commit it; ``start`` is the node before them."""
    problems = []
    if state.cpu < 0 or state.mem < 0 or state.pods < 0:
        problems.append("CPU, memory or pod slots over-committed")
    if any(v < 0 for v in state.gpu_milli) or any(v < 0 for v in state.gpu_mem):
        problems.append("a GPU over-committed")
    if any(v < 0 for v in state.ext.values()):
        problems.append("an extended resource over-committed")
    # GPUs taken whole, by index or left to the node, against the whole free ones. A snapshot with more
    # GPUs of unknown index than look free (shares of unknown index on partly used GPUs) is no fault of
    # the plan's: it adds none there, and may still place pods that need no untouched GPU.
    taken = state.unknown - start.unknown + len(start.fully_free_gpus()) - len(state.fully_free_gpus())
    if taken > start.whole_free:
        problems.append("more whole GPUs than are free")
    if problems:
        raise AssignmentError(f"node {state.name}: " + "; ".join(problems))
