"""Trace replay following the FGD paper's method (Weng et al., USENIX ATC'23).

Method, as in the authors' simulator:

* only the GPU nodes; their order is shuffled by the seed (the simulator gives
  nodes random names, so ties between equal nodes fall at random);
* the workload's tasks are sorted by name and shuffled by the seed, then tasks
  drawn with replacement from the workload are appended until the requested
  GPUs would pass 130% of capacity ("inflation");
* tasks arrive one at a time, never leave, and each is placed at once or fails;
  CPU, memory, GPU count, per-GPU share and the ``gpu_spec`` model constraint
  are respected;
* after every task the allocated GPU share, FGD fragmentation (against the
  typical shapes of the original workload) and fragmentation rate are
  recorded; the value at arrival ``k`` % is the mean of the records whose
  arrived demand rounds to ``k`` % of capacity (the authors' binning).

``batch > 1`` lets a joint optimiser see the next ``batch`` arrived tasks and
place them together (:mod:`optsched.bench.batch`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optsched.bench.progress import Progress
from optsched.bench.score_cache import TrackedChooser
from optsched.bench.trace_data import TracePod, load_nodes, load_pods
from optsched.capacity.fragmentation import FragMeter, Shape, products_of, typical_shapes
from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI, PodRequest
from optsched.policies.base import NodeChooser
from optsched.policies.choosers import ScoredChooser, make_chooser

MAX_PERCENT = 130
"""Arrival is recorded from 0 to this percentage of GPU capacity."""

SLIVER_EDGES = (100, 200, 500)
"""Milli-GPU edges of the sliver classes in the end-of-replay idle breakdown (<0.1, <0.2, <0.5, rest)."""


@dataclass
class Placement:
    """Where one arrived task went (``node`` is -1 when it failed)."""

    pod: int
    node: int
    gpus: tuple[int, ...]


@dataclass
class SeedRun:
    """One policy on one seed: metrics per arrival percentage and decision latencies."""

    policy: str
    seed: int
    workload: str
    batch: int
    capacity_gpus: float
    arrived_pods: int = 0
    placed_pods: int = 0
    failed_pods: int = 0
    failed_gpus: float = 0.0
    allocated_pct: list[float | None] = field(default_factory=list)
    fragmentation_pct: list[float | None] = field(default_factory=list)
    frag_rate_pct: list[float | None] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    placements: list[Placement] = field(default_factory=list)
    idle_whole_gpus: float = 0.0
    """At the end of the replay: idle GPU capacity in GPUs nothing uses."""
    idle_sliver_gpus: list[float] = field(default_factory=list)
    """At the end: idle capacity left in partly used GPUs, by the size of what is left (``SLIVER_EDGES``)."""

    def unallocated_pct(self, k: int) -> float | None:
        """Unallocated GPU % at ``k`` % arrival (None where no record fell near ``k``)."""
        value = self.allocated_pct[k]
        return None if value is None else 100.0 - value


def trace_shapes(pods: Sequence[TracePod]) -> list[Shape]:
    """Typical shapes of a trace workload, memory left out as the authors do (their shapes are CPU + GPU)."""
    stripped = [p.request.model_copy(update={"memory_mib": 0}) for p in pods]
    return typical_shapes(stripped, limit=10_000, coverage=0.95)


def inflate(
    pods: Sequence[TracePod], capacity_milli: int, ratio: float, rng: random.Random
) -> list[TracePod]:
    """Shuffle the workload, then append tasks drawn with replacement until demand would pass ``ratio``.

    As in the authors' simulator, a workload that already asks for more is
    instead thinned by removing random tasks.
    """
    ordered = sorted(pods, key=lambda p: p.name)
    arrivals = list(ordered)
    rng.shuffle(arrivals)
    target = ratio * capacity_milli
    total = sum(p.request.gpu_milli_total for p in arrivals)
    while total > target and arrivals:  # a workload already above the target is thinned at random
        total -= arrivals.pop(rng.randrange(len(arrivals))).request.gpu_milli_total
    while True:
        pick = ordered[rng.randrange(len(ordered))]
        if total + pick.request.gpu_milli_total > target:
            break
        arrivals.append(pick)
        total += pick.request.gpu_milli_total
    return arrivals


class _Bins:
    """Mean of per-task records by rounded arrival percentage."""

    def __init__(self, size: int) -> None:
        self.sums = [[0.0, 0.0, 0.0] for _ in range(size)]
        self.counts = [0] * size

    def add(self, k: int, values: tuple[float, float, float]) -> None:
        if 0 <= k < len(self.counts):
            row = self.sums[k]
            row[0] += values[0]
            row[1] += values[1]
            row[2] += values[2]
            self.counts[k] += 1

    def means(self, metric: int) -> list[float | None]:
        out: list[float | None] = []
        size = len(self.counts)
        for k in range(size):
            lo, hi = (k, k) if self.counts[k] else (max(k - 1, 0), min(k + 1, size - 1))
            count = sum(self.counts[lo : hi + 1])
            if count == 0:
                out.append(None)
                continue
            out.append(sum(self.sums[j][metric] for j in range(lo, hi + 1)) / count)
        return out


def _round_half_up(value: float) -> int:
    """Halves round up; ``round`` would send them to the even neighbour and move records between bins."""
    return math.floor(value + 0.5)


BatchPlacer = Callable[[list[NodeState], list[PodRequest]], list[tuple[NodeState, list[int]] | None]]


def replay(
    nodes: Sequence[NodeState],
    arrivals: Sequence[TracePod],
    chooser: NodeChooser | None,
    shapes: Sequence[Shape],
    *,
    policy: str,
    seed: int,
    workload: str,
    batch: int = 1,
    batch_placer: BatchPlacer | None = None,
    keep_placements: bool = False,
    progress: Progress | None = None,
) -> SeedRun:
    """Place ``arrivals`` in order on copies of ``nodes`` and record the metrics."""
    cluster = _Replay(nodes, chooser, shapes, keep_placements=keep_placements)
    run = SeedRun(
        policy=policy, seed=seed, workload=workload, batch=batch, capacity_gpus=cluster.capacity / 1000
    )
    position = 0
    started = time.perf_counter()
    while position < len(arrivals):
        window = list(arrivals[position : position + max(batch, 1)])
        t0 = time.perf_counter()
        if batch > 1 and batch_placer is not None:
            choices = batch_placer(cluster.states, [p.request for p in window])
        else:
            window = window[:1]
            choices = [cluster.choose(window[0].request)]
        elapsed = time.perf_counter() - t0
        run.latencies_s.append(elapsed / len(window) if batch > 1 else elapsed)
        for offset, (pod, choice) in enumerate(zip(window, choices, strict=True)):
            cluster.book(run, position + offset, pod.request, choice)
        position += len(window)
        if progress is not None:
            progress.update(position)
    run.wall_s = time.perf_counter() - started
    run.idle_whole_gpus, run.idle_sliver_gpus = idle_breakdown(cluster.states)
    run.allocated_pct = cluster.bins.means(0)
    run.fragmentation_pct = cluster.bins.means(1)
    run.frag_rate_pct = cluster.bins.means(2)
    return run


class _Replay:
    """The replay's copy of the cluster, with the totals each task's outcome updates incrementally.

    Fragmentation is kept per node and summed as nodes change, so recording a
    task costs one node's measure, not the cluster's.
    """

    def __init__(
        self,
        nodes: Sequence[NodeState],
        chooser: NodeChooser | None,
        shapes: Sequence[Shape],
        *,
        keep_placements: bool,
    ) -> None:
        self.states = [n.copy() for n in nodes]
        self.index_of = {id(n): i for i, n in enumerate(self.states)}
        self.chooser = chooser
        self.tracked = TrackedChooser(chooser, self.states) if isinstance(chooser, ScoredChooser) else None
        self.keep_placements = keep_placements
        self.capacity = sum(FULL_GPU_MILLI * sum(1 for h in n.healthy if h) for n in self.states)
        self.meter = FragMeter(shapes)
        self.node_frag = [self.meter.node(n) for n in self.states]
        self.frag_total = sum(self.node_frag)
        self.used = self.capacity - sum(n.free_gpu_milli for n in self.states)
        self.arrived = 0
        self.bins = _Bins(MAX_PERCENT + 1)
        self.all_indices = list(range(len(self.states)))
        self.by_products: dict[frozenset[str], list[int]] = {}

    def eligible(self, req: PodRequest) -> list[int]:
        """Indices of the nodes whose GPU model the task accepts (all, without a ``gpu_spec``)."""
        allowed = products_of(req)
        if not allowed:
            return self.all_indices
        if allowed not in self.by_products:
            self.by_products[allowed] = [i for i in self.all_indices if self.states[i].product in allowed]
        return self.by_products[allowed]

    def choose(self, req: PodRequest) -> tuple[NodeState, list[int]] | None:
        """The online policy's choice for one task."""
        if self.tracked is not None:
            hit = self.tracked.choose(self.eligible(req), req)
            return None if hit is None else (self.states[hit[0]], hit[1])
        assert self.chooser is not None
        return self.chooser.choose([self.states[i] for i in self.eligible(req)], req)

    def book(
        self, run: SeedRun, pod: int, req: PodRequest, choice: tuple[NodeState, list[int]] | None
    ) -> None:
        """Apply one task's outcome (placed or failed) and record the metrics after it."""
        self.arrived += req.gpu_milli_total
        run.arrived_pods += 1
        if choice is None:
            run.failed_pods += 1
            run.failed_gpus += req.gpu_milli_total / FULL_GPU_MILLI
            if self.keep_placements:
                run.placements.append(Placement(pod, -1, ()))
        else:
            node, gpus = choice
            node.take(req, gpus)
            i = self.index_of[id(node)]
            if self.tracked is not None:
                self.tracked.invalidate(i)
            new_frag = self.meter.node(node)
            self.frag_total += new_frag - self.node_frag[i]
            self.node_frag[i] = new_frag
            self.used += req.gpu_milli_total
            run.placed_pods += 1
            if self.keep_placements:
                run.placements.append(Placement(pod, i, tuple(gpus)))
        capacity = self.capacity
        idle = capacity - self.used
        frag_milli = self.frag_total * FULL_GPU_MILLI
        self.bins.add(
            _round_half_up(100.0 * self.arrived / capacity),
            (
                100.0 * self.used / capacity,
                100.0 * frag_milli / capacity,
                100.0 * frag_milli / idle if idle > 0 else 0.0,
            ),
        )


def idle_breakdown(states: Sequence[NodeState]) -> tuple[float, list[float]]:
    """Idle healthy GPU capacity, in GPUs: wholly free GPUs, and the rest of partly used ones by size.

    Where demand outgrows the cluster, this says what the last idle capacity
    is made of: whole GPUs that waiting tasks could not use (their node ran out
    of CPU or memory, or the model did not match), or slivers beside GPU
    shares, which only a smaller share can fill.
    """
    whole = 0
    slivers = [0] * (len(SLIVER_EDGES) + 1)
    for node in states:
        for gpu, free in enumerate(node.gpu_milli):
            if not node.healthy[gpu] or free <= 0:
                continue
            if free >= FULL_GPU_MILLI:
                whole += free
            else:
                slivers[sum(1 for edge in SLIVER_EDGES if free >= edge)] += free
    return whole / FULL_GPU_MILLI, [milli / FULL_GPU_MILLI for milli in slivers]


def default_trace_dir() -> Path:
    """``../shared/traces/alibaba-gpu-v2023`` next to the repository checkout."""
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / "shared" / "traces" / "alibaba-gpu-v2023"


def run_policy_seeds(
    trace_dir: Path,
    workload: str,
    policy: str,
    seeds: Sequence[int],
    *,
    ratio: float = 1.3,
    batch: int = 1,
    batch_placer_factory: Callable[[Sequence[Shape], int], BatchPlacer] | None = None,
    limit_pods: int | None = None,
    keep_placements: bool = False,
    show_progress: bool = True,
) -> list[SeedRun]:
    """Replay one workload under one policy for each seed."""
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, workload)
    if limit_pods is not None:
        pods = sorted(pods, key=lambda p: p.name)[:limit_pods]
    shapes = trace_shapes(pods)
    capacity = sum(FULL_GPU_MILLI * n.gpu_count for n in nodes)
    runs = []
    for seed in seeds:
        rng = random.Random(seed)
        order = list(nodes)
        rng.shuffle(order)
        arrivals = inflate(pods, capacity, ratio, rng)
        chooser = None
        placer = None
        if batch > 1 and batch_placer_factory is not None:
            placer = batch_placer_factory(shapes, seed)
        else:
            # The authors' simulator breaks score ties by node name, and names carry a seeded random
            # prefix: ties go to the first node in a seed-shuffled order. Only Random draws at random.
            tie_seed = seed if policy == "random" else None
            chooser = make_chooser(policy, shapes, seed=tie_seed, authors_scoring=True)
        label = f"{workload} {policy} seed {seed}"
        progress = Progress(len(arrivals), label, enabled=show_progress)
        run = replay(
            order,
            arrivals,
            chooser,
            shapes,
            policy=policy,
            seed=seed,
            workload=workload,
            batch=batch,
            batch_placer=placer,
            keep_placements=keep_placements,
            progress=progress,
        )
        progress.close()
        runs.append(run)
    return runs
