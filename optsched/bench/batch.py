"""Joint placement of a window of arrived tasks: a small CP-SAT model for the trace replay.

Online policies place each task the moment it arrives. A queue in front of
the cluster (Kueue) lets a planner see the next ``N`` tasks and place them
together. For each task the model offers the nodes where FGD fragmentation
grows least (the candidates a good online rule would consider) and then picks,
jointly and within every node's CPU, memory and per-GPU capacity:

1. as much GPU demand placed as possible, then
2. as few whole free GPUs opened for GPU shares as possible: a share that
   joins a partly used GPU, or two shares of the window that pair on one,
   leave fewer slivers no later task can use (on the trace nearly all idle
   GPUs at full arrival are such slivers), then
3. the options the online FGD rule likes best: the FGD authors' integer score
   of each option (its single-task fragmentation increase; interactions of
   tasks of the window on one node are approximated by the sum), then the
   earlier node, which packs work onto fewer nodes as their simulator does.

A task the model leaves out (its candidate nodes were taken by others of the
window) gets the online FGD choice afterwards; if nothing fits, it fails, as
an online rejection would.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from optsched.capacity.fragmentation import Shape, products_of, request_key
from optsched.capacity.state import NodeState
from optsched.model.snapshot import PodRequest
from optsched.policies.choosers import FGD
from optsched.solver.clock import SearchClock

CANDIDATES_PER_TASK = 12


@dataclass(frozen=True)
class _Option:
    task: int
    node: int
    gpus: tuple[int, ...]
    cost: int
    """Rank of the option as the online rule sees it: its integer FGD score first, then node order."""


class BatchPlacer:
    """Places a window of tasks with one CP-SAT solve; falls back to FGD order if the model fails."""

    def __init__(
        self, shapes: Sequence[Shape], *, time_limit_s: float = 1.0, workers: int = 1, seed: int = 0
    ):
        # The authors' integer FGD score with ties to the earlier node: the online rule that packs best
        # on the trace; the model keeps its preferences and adds the joint view of the window.
        self.fgd = FGD(shapes, quantized=True)
        self.time_limit_s = time_limit_s
        self.workers = workers
        self.seed = seed
        # Per node: scores by request shape, valid until the node changes (only nodes we placed on do).
        self._cache: list[dict[int, tuple[float, list[int]] | None]] = []
        self._request_ids: dict[tuple[Hashable, ...], int] = {}
        self._dirty: set[int] = set()

    def __call__(
        self, states: list[NodeState], requests: list[PodRequest]
    ) -> list[tuple[NodeState, list[int]] | None]:
        if len(self._cache) != len(states):
            self._cache = [{} for _ in states]
        for index in self._dirty:
            self._cache[index].clear()
        self._dirty = set()
        options = self._options(states, requests)
        chosen = self._solve(states, requests, options)
        result: list[tuple[NodeState, list[int]] | None] = [None] * len(requests)
        # Book in arrival order, re-checking each choice against the live state (the model is exact for
        # capacity, so this only guards against a bug); a task whose choice no longer fits fails.
        for task, option in sorted(chosen.items()):
            node = states[option.node]
            req = requests[task]
            gpus: list[int] | None = list(option.gpus)
            if not self._still_fits(node, req, option.gpus):
                # Two tasks of the window scored the same free GPU on this node; the model counted the
                # node's capacity, so take the indices that are still free.
                gpus = node.choose_gpus(req) if node.fits_resources(req) else None
            if gpus is not None:
                node.take(req, gpus)
                result[task] = (node, gpus)
                self._dirty.add(option.node)
        # Candidate lists overlap (the best nodes are the same for similar tasks), so the model can leave
        # out a task that still fits elsewhere: those get the online FGD choice on the updated state.
        for task, req in enumerate(requests):
            if result[task] is not None:
                continue
            allowed = products_of(req)
            rid = self._request_ids.setdefault(request_key(req), len(self._request_ids))
            best: tuple[float, int, list[int]] | None = None
            for index, node in enumerate(states):
                if allowed and node.product not in allowed:
                    continue
                cache = self._cache[index]
                if index in self._dirty or rid not in cache:  # changed in this window: score afresh
                    hit = self.fgd.feasible_score(node, req)
                else:
                    hit = cache[rid]
                if hit is not None and (best is None or hit[0] < best[0]):
                    best = (hit[0], index, hit[1])
            if best is not None:
                node = states[best[1]]
                node.take(req, best[2])
                result[task] = (node, best[2])
                self._dirty.add(best[1])
        # The replay books the returned choices itself: undo ours so state is changed exactly once.
        for task, choice in enumerate(result):
            if choice is not None:
                choice[0].give_back(requests[task], choice[1])
        return result

    def _options(self, states: list[NodeState], requests: list[PodRequest]) -> list[_Option]:
        options: list[_Option] = []
        for task, req in enumerate(requests):
            allowed = products_of(req)
            rid = self._request_ids.setdefault(request_key(req), len(self._request_ids))
            scored: list[tuple[float, int, list[int]]] = []
            for index, node in enumerate(states):
                if allowed and node.product not in allowed:
                    continue
                cache = self._cache[index]
                if rid in cache:
                    hit = cache[rid]
                else:
                    hit = cache[rid] = self.fgd.feasible_score(node, req)
                if hit is not None:
                    scored.append((hit[0], index, hit[1]))
            scored.sort(key=lambda item: (item[0], item[1]))
            for value, index, gpus in scored[:CANDIDATES_PER_TASK]:
                cost = round(value + 100) * len(states) + index
                options.append(_Option(task, index, tuple(gpus), cost))
        return options

    def _solve(
        self, states: list[NodeState], requests: list[PodRequest], options: list[_Option]
    ) -> dict[int, _Option]:
        if not options:
            return {}
        model = cp_model.CpModel()
        x = [model.new_bool_var(f"x{i}") for i in range(len(options))]
        all_opened: list[cp_model.IntVar] = []
        by_task: dict[int, list[int]] = {}
        by_node: dict[int, list[int]] = {}
        for i, option in enumerate(options):
            by_task.setdefault(option.task, []).append(i)
            by_node.setdefault(option.node, []).append(i)
        for members in by_task.values():
            model.add_at_most_one(x[i] for i in members)
        for node_index, members in by_node.items():
            node = states[node_index]
            model.add(sum(requests[options[i].task].cpu_milli * x[i] for i in members) <= node.cpu)
            model.add(sum(requests[options[i].task].memory_mib * x[i] for i in members) <= node.mem)
            model.add(sum(x[i] for i in members) <= node.pods)
            whole_used = []
            opened: dict[int, cp_model.IntVar] = {}
            per_gpu: dict[int, list[int]] = {}
            for i in members:
                req = requests[options[i].task]
                if req.is_share:
                    per_gpu.setdefault(options[i].gpus[0], []).append(i)
                elif req.gpus:
                    whole_used.append((req.gpus, i))
            for gpu, shares in per_gpu.items():
                model.add(
                    sum(requests[options[i].task].gpu_milli * x[i] for i in shares) <= node.gpu_milli[gpu]
                )
                if node.is_fully_free(gpu):
                    opened[gpu] = model.new_bool_var(f"open{node_index}_{gpu}")
                    all_opened.append(opened[gpu])
                    for i in shares:
                        model.add_implication(x[i], opened[gpu])
            if whole_used or opened:
                model.add(sum(g * x[i] for g, i in whole_used) + sum(opened.values()) <= node.whole_free)
        placed = sum(requests[o.task].gpu_milli_total * x[i] for i, o in enumerate(options))
        cost = sum(o.cost * x[i] for i, o in enumerate(options))
        weight = 1 + sum(o.cost for o in options)
        # Lexicographic: one milli-GPU placed outweighs every opened GPU, and one opened GPU outweighs
        # any difference in option rank.
        opened_cost = weight * sum(all_opened)
        model.maximize(placed * weight * (len(all_opened) + 1) - opened_cost - cost)
        solver = cp_model.CpSolver()
        # The budget is CP-SAT's deterministic time, so a replay repeats exactly whatever the load.
        SearchClock(deterministic=True).limit(solver, self.time_limit_s)
        solver.parameters.num_workers = self.workers
        solver.parameters.random_seed = self.seed
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return {}
        return {o.task: o for i, o in enumerate(options) if solver.boolean_value(x[i])}

    @staticmethod
    def _still_fits(node: NodeState, req: PodRequest, gpus: tuple[int, ...]) -> bool:
        if not node.fits_resources(req):
            return False
        if req.is_share:
            return node.gpu_milli[gpus[0]] >= req.gpu_milli and gpus[0] in node.share_candidates(req)
        return all(node.is_fully_free(g) for g in gpus) and node.whole_free >= req.gpus


Placer = Callable[[list[NodeState], list[PodRequest]], list[tuple[NodeState, list[int]] | None]]


def batch_placer_factory(
    *, time_limit_s: float = 1.0, workers: int = 1
) -> Callable[[Sequence[Shape], int], Placer]:
    """For :func:`optsched.bench.trace.run_policy_seeds`: one placer per seed."""

    def make(shapes: Sequence[Shape], seed: int) -> BatchPlacer:
        return BatchPlacer(shapes, time_limit_s=time_limit_s, workers=workers, seed=seed)

    return make
