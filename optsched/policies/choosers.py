"""Per-pod node choosers: the scoring rules of the common baseline schedulers.

Each chooser scores every node where the pod fits and takes the best; only the
score differs. The scores follow the FGD authors' simulator (USENIX ATC'23
artifact) so the trace replay can be compared with their published results:

* ``FirstFit``: the first node in order.
* ``BestFit``: least remaining resources after placement, CPU and GPU weighted
  0.5 each and normalised by the largest node spec (128 cores, 8 GPUs).
* ``LeastAllocated``: kube-scheduler's default spreading: most free share
  after placement, averaged over CPU, memory and (on GPU nodes) GPU.
* ``FGD``: the smallest increase of FGD fragmentation
  (:mod:`optsched.capacity.fragmentation`); for a GPU share, also the GPU whose use
  increases it least (a pod of several shares takes the best-fit GPUs).
* ``GpuPacking``: shared GPUs first, then partly used nodes, then empty ones.
* ``DotProd``: Tetris-style alignment of request and free vector, as the
  authors configure it (smallest dot product wins).
* ``RandomFit``: a uniformly random feasible node.

Ties: lowest node index, or, with ``tie_seed``, a seeded random pick among the
tied nodes (stock kube-scheduler). The FGD authors' simulator takes the first
node by name, and its node names carry a seeded random prefix: lowest index in
a seed-shuffled node order. ``authors_scoring`` rounds scores to their integer
kube-scheduler scores, which decides which nodes tie; the trace replay needs
both to reproduce their figures.
Whole-GPU pods get NVLink-island-aware GPU indices from
:meth:`NodeState.choose_gpus`; a share goes on the GPU the rule prefers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from optsched.capacity.fragmentation import FragMeter, Shape, products_of
from optsched.capacity.state import NodeState
from optsched.errors import InputError
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest

MAX_SPEC_CPU = 128_000
"""CPU normaliser of the authors' BestFit and DotProd (milli-cores of their largest node)."""
MAX_SPEC_GPU = 8_000
"""GPU normaliser of the authors' BestFit and DotProd (milli-GPUs of an 8-GPU node)."""

Choice = tuple[NodeState, list[int]]


def _allowed(node: NodeState, req: PodRequest) -> bool:
    allowed = products_of(req)
    return not allowed or node.product in allowed


def _share_candidates(node: NodeState, req: PodRequest) -> list[int]:
    """:meth:`NodeState.share_candidates`, with a fast path for nodes whose GPU indices are all known."""
    if node.unknown:
        return node.share_candidates(req)
    milli, mem, healthy, tasks = node.gpu_milli, node.gpu_mem, node.healthy, node.gpu_tasks
    need, need_mem = req.gpu_milli, node.share_mem(req)
    return [
        g for g in range(len(milli)) if healthy[g] and milli[g] >= need and mem[g] >= need_mem and tasks[g]
    ]


class ScoredChooser:
    """Shared loop: score feasible nodes (lower is better) and break ties.

    :meth:`score` must depend only on the node's free state and the request,
    so callers that know which nodes changed (the trace replay) may cache it;
    :meth:`finalize` may then add randomness to the GPU indices of the winner.
    """

    name = "scored"

    def __init__(self, tie_seed: int | None = None, *, quantized: bool = False) -> None:
        self._rng = random.Random(tie_seed) if tie_seed is not None else None
        self.quantized = quantized
        """Score as the FGD authors' kube-scheduler does: whole numbers, so close nodes tie."""

    @staticmethod
    def kube_score(score: float) -> float:
        """A kube-scheduler score out of 100, truncated to a whole number (higher is better), as a cost."""
        return -float(int(score))

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        """Score and GPU indices of placing ``req`` on ``node``, or None if it does not fit."""
        raise NotImplementedError

    def feasible_score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        """:meth:`score` behind the product and CPU/memory checks, rounded so equal states tie exactly."""
        if not _allowed(node, req) or not node.fits_resources(req):
            return None
        scored = self.score(node, req)
        if scored is None:
            return None
        return round(scored[0], 9), scored[1]

    def finalize(self, node: NodeState, req: PodRequest, gpus: list[int]) -> list[int]:
        """GPU indices for the chosen node (the scored ones unless the rule randomises them)."""
        return gpus

    def pick(self, tied: list[tuple[NodeState, list[int]]]) -> tuple[NodeState, list[int]]:
        """One of the equally good candidates: the first, or a seeded random one."""
        if len(tied) == 1 or self._rng is None:
            return tied[0]
        return tied[self._rng.randrange(len(tied))]

    @property
    def random_ties(self) -> bool:
        return self._rng is not None

    def choose(self, nodes: Sequence[NodeState], req: PodRequest) -> Choice | None:
        best_score = 0.0
        tied: list[tuple[NodeState, list[int]]] = []
        random_ties = self._rng is not None
        for node in nodes:
            scored = self.feasible_score(node, req)
            if scored is None:
                continue
            value = scored[0]
            if not tied or value < best_score:
                best_score, tied = value, [(node, scored[1])]
            elif value == best_score and random_ties:
                tied.append((node, scored[1]))
        if not tied:
            return None
        node, gpus = self.pick(tied)
        return node, self.finalize(node, req, gpus)


class FirstFit(ScoredChooser):
    """The first node, in the given order, where the pod fits."""

    name = "firstfit"

    def __init__(self) -> None:
        super().__init__(None)

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        return None if gpus is None else (0.0, gpus)

    def choose(self, nodes: Sequence[NodeState], req: PodRequest) -> Choice | None:
        for node in nodes:
            scored = self.feasible_score(node, req)
            if scored is not None:
                return node, scored[1]
        return None


class BestFit(ScoredChooser):
    """Least CPU and GPU left after placement (weights 0.5/0.5, normalised by the largest spec)."""

    name = "bestfit"

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        if gpus is None:
            return None
        cpu_left = node.cpu - req.cpu_milli
        gpu_left = node.free_gpu_milli - req.gpu_milli_total
        value = 0.5 * cpu_left / MAX_SPEC_CPU + 0.5 * gpu_left / MAX_SPEC_GPU
        if self.quantized:
            return self.kube_score(100.0 * (1.0 - value)), gpus
        return value, gpus


class LeastAllocated(ScoredChooser):
    """kube-scheduler's LeastAllocated: the most free share left, averaged over resources."""

    name = "leastallocated"

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        if gpus is None:
            return None
        shares = []
        if node.cpu_total > 0:
            shares.append((node.cpu - req.cpu_milli) / node.cpu_total)
        if node.mem_total > 0:
            shares.append((node.mem - req.memory_mib) / node.mem_total)
        if node.gpu_count:
            shares.append((node.free_gpu_milli - req.gpu_milli_total) / (node.gpu_count * FULL_GPU_MILLI))
        return (-sum(shares) / len(shares) if shares else 0.0), gpus


class GpuPacking(ScoredChooser):
    """The FGD authors' GPU packing: fill shared GPUs, then used nodes, then empty nodes."""

    name = "gpupacking"

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        if gpus is None:
            return None
        if req.gpus == 0:
            return 0.0, gpus
        fully_free = len(node.fully_free_gpus())
        if fully_free == node.gpu_count:
            return -float(max(100 // 3 - fully_free, fully_free)), gpus
        # A share left to the node takes an untouched GPU of unknown index.
        used_whole = sum(1 for g in gpus if node.is_fully_free(g)) if gpus else 1
        if used_whole:
            return -float(max(100 // 2 - used_whole, 100 // 3)), gpus
        free_pct = sum(node.gpu_milli[g] * 100 // FULL_GPU_MILLI for g in gpus)
        return -float(max(100 - free_pct // 10, 100 // 2)), gpus


class DotProd(ScoredChooser):
    """Dot product of request and free (CPU, GPU) vectors normalised by the largest spec; smallest wins.

    This is the orientation the FGD authors evaluate (their score is one minus
    the normalised dot product).
    """

    name = "dotprod"

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        if gpus is None:
            return None
        cpu = (node.cpu / MAX_SPEC_CPU) * (req.cpu_milli / MAX_SPEC_CPU)
        gpu = (node.free_gpu_milli / MAX_SPEC_GPU) * (req.gpu_milli_total / MAX_SPEC_GPU)
        value = (cpu + gpu) / 2
        if self.quantized:
            return self.kube_score(100.0 * (1.0 - value)), gpus
        return value, gpus


class RandomFit(ScoredChooser):
    """A uniformly random node among those where the pod fits (and a random GPU for a share)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        gpus = node.choose_gpus(req)
        return None if gpus is None else (0.0, gpus)

    def finalize(self, node: NodeState, req: PodRequest, gpus: list[int]) -> list[int]:
        if not req.is_share or self._rng is None or not gpus:
            return gpus
        candidates = node.share_candidates(req)
        if req.gpus > 1:
            return sorted(self._rng.sample(candidates, req.gpus))
        return [candidates[self._rng.randrange(len(candidates))]]


class FGD(ScoredChooser):
    """Fragmentation Gradient Descent: place where FGD fragmentation grows least.

    Fragmentation is memoised by node state (:class:`FragMeter`), so the many
    nodes that look alike cost one evaluation.
    """

    name = "fgd"

    def __init__(
        self, shapes: Sequence[Shape], tie_seed: int | None = None, *, quantized: bool = False
    ) -> None:
        super().__init__(tie_seed, quantized=quantized)
        self.meter = FragMeter(shapes)

    def _value(self, delta: float) -> float:
        if not self.quantized:
            return round(delta, 9)
        # The authors' score is 100 * sigmoid(-increase of fragmentation in GPUs).
        return self.kube_score(100.0 / (1.0 + math.exp(delta)))

    def score(self, node: NodeState, req: PodRequest) -> tuple[float, list[int]] | None:
        before = self.meter.node(node)
        if req.is_share and req.gpus == 1:
            best: tuple[float, list[int]] | None = None
            seen: set[tuple[int, int]] = set()
            for gpu in _share_candidates(node, req):
                free = (node.gpu_milli[gpu], node.gpu_mem[gpu])
                if free in seen:  # an identical GPU gives the identical result; keep the lower index
                    continue
                seen.add(free)
                value = self._value(self.meter.after(node, req, [gpu]) - before)
                if best is None or value < best[0]:
                    best = (value, [gpu])
            if best is None and node.fresh_share_fits(req):
                # Index-unknown usage: an untouched GPU, whose index the node picks.
                best = (self._value(self.meter.after(node, req, []) - before), [])
            return best
        gpus = node.choose_gpus(req)
        if gpus is None:
            return None
        return self._value(self.meter.after(node, req, gpus) - before), gpus


CHOOSERS = ("firstfit", "bestfit", "leastallocated", "fgd", "random", "gpupacking", "dotprod")


def make_chooser(
    name: str, shapes: Sequence[Shape] = (), *, seed: int | None = None, authors_scoring: bool = False
) -> ScoredChooser:
    """A chooser by name.

    ``seed`` seeds RandomFit and random tie-breaking of the scored rules (None:
    ties go to the lowest index). ``authors_scoring`` rounds scores to the FGD
    authors' integer kube-scheduler scores, so ties (broken by node order, as
    their simulator does) fall exactly where theirs do.
    """
    key = name.lower().replace("-", "").replace("_", "")
    if key == "firstfit":
        return FirstFit()
    if key == "bestfit":
        return BestFit(seed, quantized=authors_scoring)
    if key == "leastallocated":
        return LeastAllocated(seed)
    if key == "fgd":
        return FGD(shapes, seed, quantized=authors_scoring)
    if key in ("random", "randomfit"):
        return RandomFit(seed or 0)
    if key in ("gpupacking", "packing"):
        return GpuPacking(seed)
    if key == "dotprod":
        return DotProd(seed, quantized=authors_scoring)
    raise InputError(f"unknown chooser {name!r}; expected one of {', '.join(CHOOSERS)}", field="policy")


class MostAllocated:
    """Kueue TAS's node choice inside a domain: the fullest node that still fits, lowest indices."""

    name = "tas"
    random_ties = False

    def choose(self, nodes: Sequence[NodeState], req: PodRequest) -> tuple[NodeState, list[int]] | None:
        best: tuple[tuple[int, int, int], NodeState, list[int]] | None = None
        for position, node in enumerate(nodes):
            if not node.fits_resources(req):
                continue
            gpus = node.choose_gpus(req, island_aware=False)
            if gpus is None:
                continue
            key = (node.free_gpu_milli, node.cpu, position)
            if best is None or key < best[0]:
                best = (key, node, gpus)
        return (best[1], best[2]) if best is not None else None
