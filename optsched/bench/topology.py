"""Topology benchmark: a synthetic modern GPU cluster with jobs arriving, running and leaving.

The Alibaba trace has no NVLink islands and no multi-node gangs, so this
benchmark builds what it lacks: racks of 16-32 nodes grouped in blocks; H100
and H200 boards (one NVSwitch island of 8 GPUs), A100 PCIe boxes (four NVLink
pairs) and GB200-style NVL72 racks (18 nodes of 4 GPUs). A seeded generator
sends 1-8-GPU pods and 2-64-pod gangs (8 GPUs per pod) with durations, so
departures fragment the cluster over time. Every cycle the pending queue is
planned by the policy under test (the same ``planning.plan`` the CLI uses);
admitted work starts at once and leaves when its duration is over.

Per policy: GPUs allocated over time, the share of multi-GPU pods inside one
NVLink island (among pods whose node has an island big enough), racks and
blocks spanned per gang, gang wait (cycles from arrival to admission) and
stranded GPUs (whole free GPUs on nodes where no pod shape still waiting in
the queue fits).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from optsched.bench.options import TOPOLOGY_POLICIES, parse_policies, parse_seeds
from optsched.bench.progress import Progress
from optsched.capacity.fragmentation import stranded_gpus, typical_shapes
from optsched.capacity.state import ClusterState, NodeState
from optsched.errors import InputError
from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, HOSTNAME_LABEL, PRODUCT_LABEL
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, NodeUsage, PodRequest, PodSet, Snapshot, Workload
from optsched.settings import Settings

BLOCK, RACK = DEFAULT_TOPOLOGY_LEVELS[0], DEFAULT_TOPOLOGY_LEVELS[1]
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# (product, GPUs per node, NVLink islands, share of racks)
_KINDS = (
    ("NVIDIA-H100-80GB-HBM3", 8, ((0, 1, 2, 3, 4, 5, 6, 7),), 0.40),
    ("NVIDIA-H200", 8, ((0, 1, 2, 3, 4, 5, 6, 7),), 0.25),
    ("NVIDIA-A100-PCIE-40GB", 8, ((0, 1), (2, 3), (4, 5), (6, 7)), 0.25),
    ("NVIDIA-GB200", 4, ((0, 1, 2, 3),), 0.10),
)


def synthetic_cluster(nodes: int, seed: int) -> list[Node]:
    """Racks of one node kind each (NVL72 racks: 18 nodes), 4-8 racks per block."""
    rng = random.Random(seed)
    out: list[Node] = []
    block, racks_in_block, block_size = 0, 0, rng.randint(4, 8)
    weights = [k[3] for k in _KINDS]
    while len(out) < nodes:
        product, gpus, islands, _ = rng.choices(_KINDS, weights=weights)[0]
        size = 18 if product == "NVIDIA-GB200" else rng.randint(16, 32)
        size = min(size, nodes - len(out))
        rack = f"b{block}-r{racks_in_block}"
        for i in range(size):
            name = f"{rack}-n{i:02d}"
            out.append(
                Node(
                    name=name,
                    labels={PRODUCT_LABEL: product, BLOCK: f"b{block}", RACK: rack, HOSTNAME_LABEL: name},
                    cpu_milli=gpus * 16_000,
                    memory_mib=gpus * 131_072,
                    gpu_count=gpus,
                    gpu_product=product,
                    gpu_memory_mib=81_920,
                    nvlink_islands=islands,
                )
            )
        racks_in_block += 1
        if racks_in_block == block_size:
            block, racks_in_block, block_size = block + 1, 0, rng.randint(4, 8)
    return out


@dataclass(frozen=True)
class Job:
    name: str
    arrival: int
    duration: int
    pods: int
    gpus: int

    @property
    def total_gpus(self) -> int:
        return self.pods * self.gpus

    @property
    def is_gang(self) -> bool:
        return self.pods > 1


def generate_jobs(capacity_gpus: int, count: int, load: float, seed: int) -> list[Job]:
    """Jobs whose offered GPU load (arrival rate x GPUs x duration) is ``load`` x capacity.

    Gangs are capped at a quarter of the cluster so every job can eventually run.
    """
    rng = random.Random(seed)
    shapes: list[tuple[int, int]] = []
    for _ in range(count):
        if rng.random() < 0.7:
            shapes.append((1, rng.choices((1, 2, 4, 8), weights=(4, 3, 2, 2))[0]))
        else:
            gpus = rng.choice((4, 8))
            sizes = [p for p in (2, 4, 8, 16, 32, 64) if p * gpus <= capacity_gpus // 4] or [2]
            weights = [
                w for p, w in zip((2, 4, 8, 16, 32, 64), (8, 6, 4, 2, 1, 0.5), strict=True) if p in sizes
            ]
            shapes.append((rng.choices(sizes, weights=weights)[0], gpus))
    durations = [max(1, round(rng.lognormvariate(math.log(12), 0.6))) for _ in range(count)]
    work = sum(p * g * d for (p, g), d in zip(shapes, durations, strict=True))
    horizon = max(1, round(work / (load * capacity_gpus)))
    arrivals = sorted(rng.randrange(horizon) for _ in range(count))
    return [
        Job(f"job-{i:05d}", arrivals[i], durations[i], pods, gpus)
        for i, ((pods, gpus), _) in enumerate(zip(shapes, durations, strict=True))
    ]


def _workload(job: Job) -> Workload:
    request = PodRequest(cpu_milli=job.gpus * 8_000, memory_mib=job.gpus * 65_536, gpus=job.gpus)
    pod_set = PodSet(
        name="main",
        count=job.pods,
        request=request,
        preferred_topology=RACK if job.is_gang else None,
    )
    return Workload(
        namespace="bench",
        name=job.name,
        created=_EPOCH + timedelta(minutes=job.arrival, microseconds=int(job.name[4:])),
        pod_sets=(pod_set,),
    )


@dataclass
class PolicyResult:
    policy: str
    seed: int
    allocated_pct: list[float] = field(default_factory=list)
    stranded: list[int] = field(default_factory=list)
    nvlink_eligible: int = 0
    nvlink_hits: int = 0
    gang_racks: list[int] = field(default_factory=list)
    gang_blocks: list[int] = field(default_factory=list)
    gang_wait: list[int] = field(default_factory=list)
    job_wait: list[int] = field(default_factory=list)
    admitted_gpu_cycles: float = 0.0
    unfinished: int = 0
    plan_seconds: list[float] = field(default_factory=list)
    busy_cycles: int = 0
    invalid_plans: int = 0
    avoidable_splits: int = 0
    """Multi-GPU pods split over NVLink islands although their node had one island free to hold them."""
    """Plans ``check_plan`` rejected (each cycle's plan is validated independently of the policy)."""
    """Cycles up to the last arrival: the mean allocation is taken over them (the queue drains after)."""

    def summary(self) -> dict[str, float]:
        def mean(values: list[int] | list[float]) -> float:
            return statistics.fmean(values) if values else float("nan")

        waits = sorted(self.gang_wait)
        busy = self.allocated_pct[: self.busy_cycles] if self.busy_cycles else self.allocated_pct
        return {
            "gpus_allocated_pct_mean": round(mean(busy), 2),
            "nvlink_one_island_pct": round(100 * self.nvlink_hits / self.nvlink_eligible, 2)
            if self.nvlink_eligible
            else float("nan"),
            "racks_per_gang": round(mean(self.gang_racks), 3),
            "blocks_per_gang": round(mean(self.gang_blocks), 3),
            "gang_wait_mean": round(mean(self.gang_wait), 2),
            "gang_wait_p95": float(waits[min(len(waits) - 1, int(0.95 * len(waits)))])
            if waits
            else float("nan"),
            "job_wait_mean": round(mean(self.job_wait), 2),
            "stranded_gpus_mean": round(mean(self.stranded), 2),
            "unfinished_jobs": float(self.unfinished),
            "avoidable_splits": float(self.avoidable_splits),
            "invalid_plans": float(self.invalid_plans),
            "plan_seconds_p50": round(statistics.median(self.plan_seconds), 3) if self.plan_seconds else 0.0,
        }


def simulate(
    policy: str,
    nodes: list[Node],
    jobs: list[Job],
    *,
    seed: int,
    time_limit_s: float,
    progress: Progress | None = None,
    max_cycles: int | None = None,
    validate: bool = True,
) -> PolicyResult:
    """Run the arrival/departure simulation under one policy (each plan checked by ``check_plan``)."""
    from optsched import planning
    from optsched.validate import check_plan

    # Deterministic time: a policy's run is repeatable, so differences between policies are theirs.
    settings = Settings(time_limit_s=time_limit_s, workers=1, random_seed=seed, deterministic_time=True)
    node_by_name = {n.name: n for n in nodes}
    capacity = sum(n.gpu_count for n in nodes)
    result = PolicyResult(policy=policy, seed=seed, busy_cycles=(jobs[-1].arrival + 1) if jobs else 0)
    by_name = {j.name: j for j in jobs}
    pending: list[Job] = []
    running: list[tuple[int, Job, list[tuple[str, tuple[int, ...]]]]] = []  # (end, job, pods)
    next_job = 0
    last_arrival = jobs[-1].arrival if jobs else 0
    limit = max_cycles if max_cycles is not None else last_arrival + 10 * max(j.duration for j in jobs) + 50
    cycle = 0
    changed = True
    while cycle <= limit and (next_job < len(jobs) or pending or running):
        still_running = [r for r in running if r[0] > cycle]
        changed = changed or len(still_running) != len(running)
        running = still_running
        if not running and next_job == len(jobs) and cycle > last_arrival + 1 and result.plan_seconds:
            # Nothing runs and nothing arrives: what still waits can never be admitted.
            break
        while next_job < len(jobs) and jobs[next_job].arrival <= cycle:
            pending.append(jobs[next_job])
            next_job += 1
            changed = True
        usage = _usage(nodes, running, by_name)
        if pending and changed:
            # With no arrival, departure or admission since the last plan the queue and the cluster
            # are as they were, and so would the plan be: skip it.
            snapshot = Snapshot(
                nodes=tuple(nodes), usage=usage, workloads=tuple(_workload(j) for j in pending)
            )
            started = time.perf_counter()
            plan = planning.plan(snapshot, settings, policy, check=False)
            result.plan_seconds.append(time.perf_counter() - started)
            if validate and check_plan(snapshot, plan):
                result.invalid_plans += 1
            state = ClusterState.from_snapshot(snapshot)
            admitted = _apply(plan, state, result)
            for job_name, pods in admitted.items():
                job = by_name[job_name]
                running.append((cycle + job.duration, job, pods))
                _record_job(result, job, pods, cycle, node_by_name)
            pending = [j for j in pending if j.name not in admitted]
            usage = _usage(nodes, running, by_name)
            changed = bool(admitted)
        state = ClusterState([NodeState.from_node(n, usage.get(n.name)) for n in nodes])
        used = capacity - sum(n.free_gpu_milli for n in state.nodes) / 1000
        result.allocated_pct.append(100.0 * used / capacity)
        # Stranded against what waits now: free GPUs no queued pod shape can use (0 with an empty queue).
        shapes = typical_shapes(
            (_workload(j).pod_sets[0].request for j in pending), limit=1_000, coverage=1.0
        )
        result.stranded.append(stranded_gpus(state, shapes) if shapes else 0)
        cycle += 1
        if progress is not None:
            progress.update(min(next_job, len(jobs)))
    result.unfinished = len(pending)
    return result


def _usage(
    nodes: list[Node],
    running: list[tuple[int, Job, list[tuple[str, tuple[int, ...]]]]],
    by_name: dict[str, Job],
) -> dict[str, NodeUsage]:
    del by_name
    per_node: dict[str, list[tuple[Job, tuple[int, ...]]]] = {}
    for _end, job, pods in running:
        for node_name, gpus in pods:
            per_node.setdefault(node_name, []).append((job, gpus))
    counts = {n.name: n.gpu_count for n in nodes}
    usage = {}
    for node_name, items in per_node.items():
        milli = [0] * counts[node_name]
        for _job, gpus in items:
            for g in gpus:
                milli[g] = 1000
        usage[node_name] = NodeUsage(
            cpu_milli=sum(j.gpus * 8_000 for j, _ in items),
            memory_mib=sum(j.gpus * 65_536 for j, _ in items),
            pods=len(items),
            gpu_milli=tuple(milli),
        )
    return usage


def _apply(
    plan: Plan, state: ClusterState, result: PolicyResult
) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    """Admitted jobs and their pods' (node, GPUs); missing GPU indices are chosen island-aware.

    Also counts avoidable NVLink splits: a multi-GPU pod spread over islands
    although, when it was placed, its node had one island free enough to hold it.
    """
    admitted: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for decision in plan.workloads:
        if decision.decision != "admit":
            continue
        name = decision.name.split("/", 1)[-1]
        pods: list[tuple[str, tuple[int, ...]]] = []
        for pod_set in decision.pod_sets:
            for pod in pod_set.pods:
                node = state.by_name[pod.node]
                gpus = list(pod.gpus) if pod.gpus is not None else None
                if gpus is None:
                    gpus = node.choose_gpus(PodRequest(gpus=_gpus_of(decision.gpus, len(pod_set.pods))))
                    if gpus is None:
                        raise RuntimeError(f"plan admits {decision.name} on {pod.node} without free GPUs")
                if len(gpus) > 1 and not node.in_one_island(gpus):
                    free = set(node.fully_free_gpus())
                    if any(len(free.intersection(island)) >= len(gpus) for island in node.islands):
                        result.avoidable_splits += 1
                node.take(PodRequest(gpus=len(gpus)), gpus)
                pods.append((pod.node, tuple(gpus)))
        admitted[name] = pods
    return admitted


def _gpus_of(total: float, pods: int) -> int:
    return round(total / pods) if pods else 0


def _record_job(
    result: PolicyResult,
    job: Job,
    pods: list[tuple[str, tuple[int, ...]]],
    cycle: int,
    node_by_name: dict[str, Node],
) -> None:
    wait = cycle - job.arrival
    result.job_wait.append(wait)
    for node_name, gpus in pods:
        node = node_by_name[node_name]
        if len(gpus) > 1 and any(len(island) >= len(gpus) for island in node.nvlink_islands):
            result.nvlink_eligible += 1
            if any(set(gpus) <= set(island) for island in node.nvlink_islands):
                result.nvlink_hits += 1
    if job.is_gang:
        result.gang_wait.append(wait)
        result.gang_racks.append(len({node_by_name[n].labels[RACK] for n, _ in pods}))
        result.gang_blocks.append(len({node_by_name[n].labels[BLOCK] for n, _ in pods}))
    result.admitted_gpu_cycles += job.total_gpus * job.duration


SUMMARY_COLUMNS = (
    ("gpus_allocated_pct_mean", "GPUs allocated % (mean)"),
    ("nvlink_one_island_pct", "multi-GPU pods in one NVLink island %"),
    ("avoidable_splits", "avoidable island splits"),
    ("racks_per_gang", "racks / gang"),
    ("blocks_per_gang", "blocks / gang"),
    ("gang_wait_mean", "gang wait (cycles)"),
    ("gang_wait_p95", "gang wait p95"),
    ("job_wait_mean", "job wait (cycles)"),
    ("stranded_gpus_mean", "stranded GPUs (mean)"),
    ("unfinished_jobs", "never admitted"),
    ("plan_seconds_p50", "plan s (p50)"),
    ("invalid_plans", "invalid plans"),
)


def summary_table(results: list[PolicyResult]) -> str:
    by_policy: dict[str, list[dict[str, float]]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r.summary())
    head = ["policy", "seeds", *[label for _, label in SUMMARY_COLUMNS]]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for policy, summaries in by_policy.items():
        cells = [f"**{policy}**", str(len(summaries))]
        for key, _ in SUMMARY_COLUMNS:
            values = [s[key] for s in summaries if not math.isnan(s[key])]
            cells.append(f"{statistics.fmean(values):.2f}" if values else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_topology_command(args: argparse.Namespace) -> int:
    from optsched.bench.plots import plot_bars, plot_lines

    if args.nodes < 18 or args.jobs < 1:
        raise InputError("need at least 18 nodes and 1 job", field="--nodes/--jobs")
    if args.load <= 0:
        raise InputError("must be positive", field="--load")
    policies = parse_policies(args.policies, TOPOLOGY_POLICIES)
    seeds = parse_seeds(args.seeds)
    results: list[PolicyResult] = []
    for seed in seeds:
        nodes = synthetic_cluster(args.nodes, seed)
        jobs = generate_jobs(sum(n.gpu_count for n in nodes), args.jobs, args.load, seed)
        for policy in policies:
            progress = Progress(len(jobs), f"topology {policy} seed {seed}", enabled=not args.no_progress)
            results.append(
                simulate(policy, nodes, jobs, seed=seed, time_limit_s=args.time_limit, progress=progress)
            )
            progress.close()
    total_gpus = sum(n.gpu_count for n in synthetic_cluster(args.nodes, seeds[0]))
    print(
        f"\n## topology benchmark: {args.nodes} nodes ({total_gpus} GPUs), {args.jobs} jobs, "
        f"offered load {args.load:g}, seeds {args.seeds}\n"
    )
    print(summary_table(results))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "load": args.load,
        "seeds": seeds,
        "results": [
            {
                "policy": r.policy,
                "seed": r.seed,
                "summary": r.summary(),
                "allocated_pct": [round(v, 3) for v in r.allocated_pct],
            }
            for r in results
        ],
    }
    (out / "topology-results.json").write_text(json.dumps(payload, indent=1))
    if not args.no_plots:
        first = [r for r in results if r.seed == seeds[0]]
        plot_lines(
            out / "topology-allocated.png",
            "GPUs allocated over time",
            {r.policy: (list(range(len(r.allocated_pct))), r.allocated_pct) for r in first},
            "cycle",
            "GPUs allocated (%)",
        )
        names = list(dict.fromkeys(r.policy for r in results))

        def mean_of(key: str) -> list[float]:
            return [statistics.fmean(r.summary()[key] for r in results if r.policy == name) for name in names]

        title = f"mean over seeds {args.seeds}"
        plot_bars(
            out / "topology-nvlink.png",
            f"multi-GPU pods inside one NVLink island ({title})",
            names,
            mean_of("nvlink_one_island_pct"),
            "%",
        )
        plot_bars(
            out / "topology-racks.png",
            f"racks spanned per gang ({title})",
            names,
            mean_of("racks_per_gang"),
            "racks / gang",
        )
        print(f"plots: {out}/topology-*.png", file=sys.stderr)
    print(f"results: {out / 'topology-results.json'}", file=sys.stderr)
    return 0
