"""How low can unallocated GPUs go on a trace? A floor from GPU-share packing alone.

Trace tasks that ask for part of one GPU leave slivers: two 0.6-GPU shares
cannot share a GPU, so each leaves 0.4 idle unless a share of at most 0.4
fills it. Whatever the placement rule, and however many arrived tasks it sees
at once, the GPUs that hold shares carry at least the bin-packing waste of
those shares. This module computes that waste for the shares that have
arrived, with the trace's arrivals and the replay's binning, so a batch target
can be checked against what is possible before anyone tunes a model for it.

The floor treats every GPU as an independent bin of 1000 milli and ignores
CPU, memory, GPU models and whole-GPU tasks; each relaxation only makes
packing easier, so the floor holds for any placement that places every share
that has arrived. It does not hold for a rule that rejects shares that fit.

Two numbers per record: the Martello-Toth L2 lower bound on the number of
GPUs the shares need (a proof: no packing uses fewer), and best-fit
decreasing, which sorts all shares that have arrived, i.e. knows the future
the replay hides, and is a packing one could actually reach with that
knowledge.

A second figure bounds the end of the replay, where demand exceeds capacity
and a rule may leave work out: shares above half a GPU never share a GPU with
each other, and what they leave beside them only smaller shares can fill
(whole-GPU tasks need whole GPUs; there are no departures). So for any rule
that places every share of at least ``T`` milli arriving before 100% arrival,
the GPUs holding those shares stay idle by at least their remainders minus all
the milli of the shares small enough to fill them that ever arrive; the best
``T`` gives a ceiling on the allocated GPU % at the end.

Run: ``python -m optsched.bench.batch_floor --seeds 42-51``.
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from optsched.bench.options import parse_seeds
from optsched.bench.trace import default_trace_dir, inflate
from optsched.bench.trace_data import TracePod, load_nodes, load_pods
from optsched.errors import InputError
from optsched.model.snapshot import FULL_GPU_MILLI


def share_milli(pod: TracePod) -> int | None:
    """The GPU share of a task that uses part of one GPU, else None."""
    req = pod.request
    if req.gpus == 1 and 0 < req.gpu_milli < FULL_GPU_MILLI:
        return req.gpu_milli
    return None


def min_bins_lower_bound(sizes: Counter[int], capacity: int = FULL_GPU_MILLI) -> int:
    """Martello-Toth L2: no packing of ``sizes`` (size -> count) into bins of ``capacity`` uses fewer bins."""
    total = sum(size * count for size, count in sizes.items())
    best = math.ceil(total / capacity)
    for alpha in sorted({0, *(s for s in sizes if s <= capacity // 2)}):
        big = sum(c for s, c in sizes.items() if s > capacity - alpha)
        mid_count = sum(c for s, c in sizes.items() if capacity - alpha >= s > capacity / 2)
        mid_sum = sum(s * c for s, c in sizes.items() if capacity - alpha >= s > capacity / 2)
        small_sum = sum(s * c for s, c in sizes.items() if capacity / 2 >= s >= alpha)
        spill = small_sum - (mid_count * capacity - mid_sum)
        best = max(best, big + mid_count + max(0, math.ceil(spill / capacity)))
    return best


def best_fit_decreasing_bins(sizes: Iterable[int], capacity: int = FULL_GPU_MILLI) -> int:
    """Bins used by best-fit decreasing: each item, largest first, into the fullest bin it fits."""
    room: list[int] = []  # free space of the open bins, sorted
    for size in sorted(sizes, reverse=True):
        at = bisect.bisect_left(room, size)
        if at == len(room):
            bisect.insort(room, capacity - size)
        else:
            left = room.pop(at) - size
            bisect.insort(room, left)
    return len(room)


@dataclass(frozen=True)
class SeedFloor:
    """Sliver waste of the shares that arrived, as % of all GPUs, at one arrival percentage of one seed."""

    seed: int
    percent: int
    shares: int
    """Shares arrived by the last record binned at ``percent``."""
    lower_bound_pct: float
    best_fit_decreasing_pct: float


def floor_at(arrivals: Sequence[TracePod], capacity_milli: int, percent: int, *, seed: int = 0) -> SeedFloor:
    """The floor at ``percent`` arrival, averaged over the records the replay bins there.

    The replay reports the value at ``k`` % as the mean over the tasks whose
    arrived demand rounds to ``k`` % of capacity; the floor of each such
    record is the waste of the shares arrived by then, averaged the same way.
    """
    sizes: Counter[int] = Counter()
    arrived = 0
    # Records of percent - 1, percent and percent + 1: like the replay, a percentage no record rounds to
    # (a large task jumped over it) takes the mean of its neighbours' records.
    records: dict[int, list[tuple[float, float, int]]] = {percent - 1: [], percent: [], percent + 1: []}
    for pod in arrivals:
        arrived += pod.request.gpu_milli_total
        share = share_milli(pod)
        if share is not None:
            sizes[share] += 1
        k = math.floor(100.0 * arrived / capacity_milli + 0.5)
        if k > percent + 1:
            break
        if k not in records:
            continue
        total = sum(s * c for s, c in sizes.items())
        lower = 100.0 * (min_bins_lower_bound(sizes) * FULL_GPU_MILLI - total) / capacity_milli
        bfd = best_fit_decreasing_bins(sizes.elements())
        packed = 100.0 * (bfd * FULL_GPU_MILLI - total) / capacity_milli
        records[k].append((lower, packed, sum(sizes.values())))
    chosen = records[percent] or records[percent - 1] + records[percent + 1]
    if not chosen:
        raise InputError(f"no arrival record rounds to {percent}% of capacity or next to it", field="percent")
    lower_pct = statistics.fmean(r[0] for r in chosen)
    packed_pct = statistics.fmean(r[1] for r in chosen)
    return SeedFloor(seed, percent, chosen[-1][2], lower_pct, packed_pct)


@dataclass(frozen=True)
class EndCeiling:
    """Most GPUs a rule can have allocated at the end if it places every big share arriving early."""

    seed: int
    threshold_milli: int
    """``T``: the rule places every share of at least this size that arrives before ``placed_by`` %."""
    big_shares: int
    idle_floor_pct: float
    """Idle GPU capacity at the end, at least, as % of all GPUs."""

    @property
    def allocated_ceiling_pct(self) -> float:
        return 100.0 - self.idle_floor_pct


def end_ceiling(
    arrivals: Sequence[TracePod], capacity_milli: int, *, placed_by: int = 100, seed: int = 0
) -> EndCeiling:
    """The bound of the module docstring, for the threshold that makes it largest."""
    early: Counter[int] = Counter()
    every: Counter[int] = Counter()
    arrived = 0
    for pod in arrivals:
        arrived += pod.request.gpu_milli_total
        share = share_milli(pod)
        if share is None:
            continue
        every[share] += 1
        if 100.0 * arrived / capacity_milli <= placed_by:
            early[share] += 1
    best = EndCeiling(seed, FULL_GPU_MILLI, 0, 0.0)
    for threshold in sorted(size for size in early if size > FULL_GPU_MILLI // 2):
        left = sum((FULL_GPU_MILLI - size) * n for size, n in early.items() if size >= threshold)
        fillers = sum(size * n for size, n in every.items() if size <= FULL_GPU_MILLI - threshold)
        idle_pct = 100.0 * max(0, left - fillers) / capacity_milli
        if idle_pct > best.idle_floor_pct:
            count = sum(n for size, n in early.items() if size >= threshold)
            best = EndCeiling(seed, threshold, count, idle_pct)
    return best


def trace_floors(
    trace_dir: Path, workload: str, seeds: Sequence[int], *, percent: int = 100, ratio: float = 1.3
) -> list[SeedFloor]:
    """The floor for each seed, with the replay's arrivals (same seeded shuffle and inflation)."""
    return [
        floor_at(arrivals, capacity, percent, seed=seed)
        for seed, arrivals, capacity in _arrivals(trace_dir, workload, seeds, ratio)
    ]


def trace_ceilings(
    trace_dir: Path, workload: str, seeds: Sequence[int], *, placed_by: int = 100, ratio: float = 1.3
) -> list[EndCeiling]:
    """The end-of-replay ceiling for each seed, with the replay's arrivals."""
    return [
        end_ceiling(arrivals, capacity, placed_by=placed_by, seed=seed)
        for seed, arrivals, capacity in _arrivals(trace_dir, workload, seeds, ratio)
    ]


def _arrivals(
    trace_dir: Path, workload: str, seeds: Sequence[int], ratio: float
) -> Iterable[tuple[int, list[TracePod], int]]:
    """The replay's arrivals per seed (same seeded shuffle and inflation), with the GPU capacity in milli."""
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, workload)
    capacity = sum(FULL_GPU_MILLI * n.gpu_count for n in nodes)
    for seed in seeds:
        rng = random.Random(seed)
        rng.shuffle(list(nodes))  # the replay shuffles the nodes first; keep the generator in step
        yield seed, inflate(pods, capacity, ratio, rng), capacity


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m optsched.bench.batch_floor``: print both bounds per seed; 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m optsched.bench.batch_floor",
        description="Lower bound on unallocated GPU %% from packing the trace's GPU shares.",
    )
    parser.add_argument("--trace-dir", type=Path, default=None, help="default: as optsched bench trace")
    parser.add_argument("--workload", default="default")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--percent", type=int, default=100, help="arrival percentage; default 100")
    parser.add_argument(
        "--placed-by",
        type=int,
        default=100,
        help="the end-of-replay ceiling is for rules that place every big share arriving before this "
        "arrival percentage; default 100",
    )
    args = parser.parse_args(argv)
    try:
        trace_dir = args.trace_dir or default_trace_dir()
        floors = trace_floors(trace_dir, args.workload, parse_seeds(args.seeds), percent=args.percent)
    except InputError as exc:
        print(f"optsched: error: {exc}", file=sys.stderr)
        return 2
    print(f"Sliver waste of the GPU shares arrived, % of all GPUs, at {args.percent}% arrival\n")
    print("| seed | shares arrived | floor (L2 lower bound) | best-fit decreasing, all shares known |")
    print("| --- | --- | --- | --- |")
    for f in floors:
        print(f"| {f.seed} | {f.shares} | {f.lower_bound_pct:.2f} | {f.best_fit_decreasing_pct:.2f} |")
    if len(floors) > 1:
        lo = [f.lower_bound_pct for f in floors]
        bfd = [f.best_fit_decreasing_pct for f in floors]
        print(
            f"| mean ± sd | | {statistics.fmean(lo):.2f} ± {statistics.stdev(lo):.2f} "
            f"| {statistics.fmean(bfd):.2f} ± {statistics.stdev(bfd):.2f} |"
        )
    ceilings = trace_ceilings(trace_dir, args.workload, parse_seeds(args.seeds), placed_by=args.placed_by)
    print(
        "\nCeiling on GPUs allocated at the end of the replay for a rule that places every share of at "
        f"least T milli arriving before {args.placed_by}% arrival\n"
    )
    print("| seed | T (milli) | such shares | idle at least, % | allocated at most, % |")
    print("| --- | --- | --- | --- | --- |")
    for c in ceilings:
        print(
            f"| {c.seed} | {c.threshold_milli} | {c.big_shares} | {c.idle_floor_pct:.2f} "
            f"| {c.allocated_ceiling_pct:.2f} |"
        )
    if len(ceilings) > 1:
        top = [c.allocated_ceiling_pct for c in ceilings]
        print(f"| mean ± sd | | | | {statistics.fmean(top):.2f} ± {statistics.stdev(top):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
