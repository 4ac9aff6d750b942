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

import statistics
import time
from dataclasses import dataclass, field

from optsched import planning
from optsched.bench.progress import Progress
from optsched.bench.topology_cluster import BLOCK, RACK, Job, workload_of
from optsched.capacity.fragmentation import stranded_gpus, typical_shapes
from optsched.capacity.state import ClusterState, NodeState
from optsched.model.plan import Plan
from optsched.model.snapshot import Node, NodeUsage, PodRequest, Snapshot
from optsched.settings import Settings
from optsched.validate import check_plan


@dataclass
class PolicyResult:
    """What one policy did on one seed: per-cycle series, per-job records and plan counts."""

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
    """Cycles up to the last arrival: the mean allocation is taken over them (the queue drains after)."""
    invalid_plans: int = 0
    """Plans ``check_plan`` rejected (each cycle's plan is validated independently of the policy)."""
    avoidable_splits: int = 0
    """Multi-GPU pods split over NVLink islands although their node had one island free to hold them."""

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


Running = tuple[int, Job, list[tuple[str, tuple[int, ...]]]]
"""A job holding GPUs: the cycle it leaves, the job, and each pod's (node, GPU indices)."""


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
    # Deterministic time: a policy's run is repeatable, so differences between policies are theirs.
    settings = Settings(time_limit_s=time_limit_s, workers=1, random_seed=seed, deterministic_time=True)
    run = _Simulation(policy, settings, nodes, jobs, seed=seed, validate=validate)
    last_arrival = jobs[-1].arrival if jobs else 0
    limit = max_cycles if max_cycles is not None else last_arrival + 10 * max(j.duration for j in jobs) + 50
    cycle = 0
    while cycle <= limit and run.active():
        if not run.step(cycle):
            break
        cycle += 1
        if progress is not None:
            progress.update(min(run.next_job, len(jobs)))
    run.result.unfinished = len(run.pending)
    return run.result


class _Simulation:
    """One policy's run: the queue, the jobs holding GPUs, and the metrics gathered cycle by cycle."""

    def __init__(
        self,
        policy: str,
        settings: Settings,
        nodes: list[Node],
        jobs: list[Job],
        *,
        seed: int,
        validate: bool,
    ) -> None:
        self.policy = policy
        self.settings = settings
        self.nodes = nodes
        self.jobs = jobs
        self.validate = validate
        self.node_by_name = {n.name: n for n in nodes}
        self.by_name = {j.name: j for j in jobs}
        self.capacity = sum(n.gpu_count for n in nodes)
        self.last_arrival = jobs[-1].arrival if jobs else 0
        self.result = PolicyResult(
            policy=policy, seed=seed, busy_cycles=(self.last_arrival + 1) if jobs else 0
        )
        self.pending: list[Job] = []
        self.running: list[Running] = []
        self.next_job = 0
        self.changed = True  # anything arrived, left or was admitted since the last plan

    def active(self) -> bool:
        """Whether jobs are still to arrive, waiting or holding GPUs."""
        return self.next_job < len(self.jobs) or bool(self.pending) or bool(self.running)

    def step(self, cycle: int) -> bool:
        """Departures, arrivals, a plan when anything changed, then the cycle's metrics.

        False, with nothing recorded, once nothing runs and nothing is left to
        arrive: what still waits can never be admitted.
        """
        still_running = [r for r in self.running if r[0] > cycle]
        self.changed = self.changed or len(still_running) != len(self.running)
        self.running = still_running
        if (
            not self.running
            and self.next_job == len(self.jobs)
            and cycle > self.last_arrival + 1
            and self.result.plan_seconds
        ):
            return False
        while self.next_job < len(self.jobs) and self.jobs[self.next_job].arrival <= cycle:
            self.pending.append(self.jobs[self.next_job])
            self.next_job += 1
            self.changed = True
        usage = _usage(self.nodes, self.running)
        if self.pending and self.changed:
            # With no arrival, departure or admission since the last plan the queue and the cluster
            # are as they were, and so would the plan be: skip it.
            usage = self._plan(cycle, usage)
        self._measure(usage)
        return True

    def _plan(self, cycle: int, usage: dict[str, NodeUsage]) -> dict[str, NodeUsage]:
        """Plan the queue, start what the plan admits; the cluster's usage afterwards."""
        snapshot = Snapshot(
            nodes=tuple(self.nodes), usage=usage, workloads=tuple(workload_of(j) for j in self.pending)
        )
        started = time.perf_counter()
        plan = planning.plan(snapshot, self.settings, self.policy, check=False)
        self.result.plan_seconds.append(time.perf_counter() - started)
        if self.validate and check_plan(snapshot, plan):
            self.result.invalid_plans += 1
        admitted = _apply(plan, ClusterState.from_snapshot(snapshot), self.result)
        for job_name, pods in admitted.items():
            job = self.by_name[job_name]
            self.running.append((cycle + job.duration, job, pods))
            _record_job(self.result, job, pods, cycle, self.node_by_name)
        self.pending = [j for j in self.pending if j.name not in admitted]
        self.changed = bool(admitted)
        return _usage(self.nodes, self.running)

    def _measure(self, usage: dict[str, NodeUsage]) -> None:
        """Record the cycle's allocated share and the GPUs stranded against the queue."""
        state = ClusterState([NodeState.from_node(n, usage.get(n.name)) for n in self.nodes])
        used = self.capacity - sum(n.free_gpu_milli for n in state.nodes) / 1000
        self.result.allocated_pct.append(100.0 * used / self.capacity)
        # Stranded against what waits now: free GPUs no queued pod shape can use (0 with an empty queue).
        shapes = typical_shapes(
            (workload_of(j).pod_sets[0].request for j in self.pending), limit=1_000, coverage=1.0
        )
        self.result.stranded.append(stranded_gpus(state, shapes) if shapes else 0)


def _usage(nodes: list[Node], running: list[Running]) -> dict[str, NodeUsage]:
    """Each node's usage from the pods of the jobs holding GPUs on it."""
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
    """GPUs per pod of a decision that reports only its total."""
    return round(total / pods) if pods else 0


def _record_job(
    result: PolicyResult,
    job: Job,
    pods: list[tuple[str, tuple[int, ...]]],
    cycle: int,
    node_by_name: dict[str, Node],
) -> None:
    """Record an admitted job's wait, its pods' NVLink fit and, for a gang, the racks and blocks it spans."""
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
