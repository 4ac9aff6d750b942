"""Property: GPUs of unknown index and shares of several GPUs, together, never over-commit a node.

Small random clusters mix plain and HAMi nodes. Bound pods run on them: whole
pods and shares, each with its GPUs on record (``optsched.io/gpus``, or HAMi's
allocation annotation) or without (its GPUs then have unknown indices); the
snapshot's usage is read from those pods by the snapshot reader. Pending work
mixes CPU-only pods, whole-GPU pods, single shares and shares of several GPUs.
Every policy must give a plan that ``check_plan`` accepts (``planning.plan``
raises otherwise), the optimizer must not fall back to its greedy plan, and a
recount made here from the bound pods themselves (a pod without indices counts
as that many whole GPUs of unknown index) must find every node and GPU within
its capacity, with no index promised where the node picks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import planning
from optsched.model.names import (
    GPU_CORES_RESOURCE,
    GPU_MEM_RESOURCE,
    GPU_RESOURCE,
    GPUS_ANNOTATION,
    HAMI_ALLOCATED_ANNOTATION,
)
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import FULL_GPU_MILLI, Node, PodRequest, PodSet, Snapshot, Workload
from optsched.settings import Settings
from optsched.snapshot.usage import node_usage
from tests.builders import node, pods, snapshot, workload

MEMORY = 16_384
CPU = 16_000
POLICIES = ("optimizer", "firstfit", "bestfit", "fgd", "tas", "leastallocated")
SETTINGS = Settings(time_limit_s=2.0, workers=1, random_seed=7, deterministic_time=True)


@dataclass(frozen=True)
class Bound:
    """A running pod: the GPUs it really holds, and whether any record says which."""

    node: str
    gpus: tuple[int, ...]
    share: bool
    cores: int
    """Percent of each GPU's compute (100 for a whole pod); 0: a share counted by its memory."""
    mem: int
    """MiB of each GPU (all of it for a whole pod)."""
    recorded: bool

    @property
    def milli(self) -> int:
        """Compute per GPU in the planner's units: the cores, else the memory fraction."""
        if self.cores:
            return self.cores * FULL_GPU_MILLI // 100
        return math.ceil(self.mem * FULL_GPU_MILLI / MEMORY)


@dataclass
class Cluster:
    """The generated nodes and the pods bound to them, as the recount reads them."""

    nodes: list[Node] = field(default_factory=list)
    bound: list[Bound] = field(default_factory=list)


# -- generation ---------------------------------------------------------------------------------


def _gpu_node(name: str, gpus: int, hami: bool, split: int) -> Node:
    plain = node(name, gpus=gpus, product="NVIDIA-A10", gpu_mem=MEMORY, cpu=CPU, mem=262_144)
    if not hami:
        return plain
    uuids = tuple(f"GPU-{name}-{g}" for g in range(gpus))
    return plain.model_copy(update={"hami": True, "gpu_split": split, "gpu_uuids": uuids})


@dataclass
class _Held:
    """What the bound pods generated so far really hold on one GPU."""

    milli: int = 0
    mem: int = 0
    tasks: int = 0
    whole: bool = False

    def takes(self, host: Node, pod: Bound) -> bool:
        if not pod.share:
            return self.tasks == 0
        split_left = not host.hami or self.tasks < host.gpu_split
        fits = self.milli + pod.milli <= FULL_GPU_MILLI and self.mem + pod.mem <= MEMORY
        return not self.whole and split_left and fits


@st.composite
def _bound_pods(draw: st.DrawFn, host: Node) -> list[Bound]:
    """Pods that really fit the node, each with or without a record of its GPUs."""
    held = [_Held() for _ in range(host.gpu_count)]
    out = []
    # Half the nodes keep a record of every pod; on the others about one pod in three has none.
    records = draw(st.sampled_from([(True, True, False), (True,)]))
    for _ in range(draw(st.integers(0, 5))):
        devices = draw(st.integers(1, 2))
        recorded = draw(st.sampled_from(records))
        if draw(st.sampled_from([True, True, True, False])):
            cores = draw(st.sampled_from([0, 30, 50]))
            # A plain node's share may name compute only; HAMi always records the memory it gave.
            mem = draw(st.sampled_from([0, 4096, 8192] if cores and not host.hami else [4096, 8192]))
            pod = Bound(host.name, (), True, cores, mem, recorded)
        else:
            pod = Bound(host.name, (), False, 100, MEMORY, recorded)
        order = draw(st.permutations(range(host.gpu_count)))
        room = [g for g in order if held[g].takes(host, pod)][:devices]
        if len(room) < devices:
            continue
        for g in room:
            held[g].milli += pod.milli
            held[g].mem += pod.mem
            held[g].tasks += 1
            held[g].whole = not pod.share
        out.append(replace(pod, gpus=tuple(sorted(room))))
    return out


@st.composite
def _pending(draw: st.DrawFn) -> PodSet:
    kind = draw(st.sampled_from(["cpu", "whole", "whole", "share", "share", "multi", "multi", "multi"]))
    cpu = draw(st.sampled_from([1000, 4000]))
    if kind == "cpu":
        request = PodRequest(cpu_milli=cpu, memory_mib=1024)
    elif kind == "whole":
        request = PodRequest(cpu_milli=cpu, memory_mib=1024, gpus=draw(st.integers(1, 2)))
    else:
        gpus = 1 if kind == "share" else draw(st.sampled_from([2, 2, 3]))
        milli = draw(st.sampled_from([0, 100, 200, 500]))
        mem = draw(st.sampled_from([0, 2048, 6000] if milli else [2048, 6000]))
        percent = draw(st.sampled_from([0, 25])) if not mem else 0
        request = PodRequest(
            cpu_milli=cpu,
            memory_mib=1024,
            gpus=gpus,
            gpu_milli=milli,
            gpu_mem_mib=mem,
            gpu_mem_percent=percent,
        )
    count = draw(st.integers(1, 2 if kind == "multi" else 3))
    return PodSet(name="main", count=count, request=request)


@st.composite
def mixed_clusters(draw: st.DrawFn) -> tuple[Snapshot, Cluster]:
    cluster = Cluster()
    for i in range(draw(st.integers(1, 3))):
        hami = draw(st.booleans())
        gpus = draw(st.sampled_from([1, 2, 3, 4, 4]))
        host = _gpu_node(f"n{i}", gpus, hami, draw(st.sampled_from([2, 3, 10])))
        cluster.nodes.append(host)
        cluster.bound += draw(_bound_pods(host))
    workloads = [workload(f"w{j}", draw(_pending())) for j in range(draw(st.integers(1, 6)))]
    return _snapshot(cluster, workloads), cluster


def _snapshot(cluster: Cluster, workloads: list[Workload]) -> Snapshot:
    """The snapshot, its usage read from the bound pods by the snapshot reader."""
    by_name = {n.name: n for n in cluster.nodes}
    usage, _ = node_usage(by_name, [_raw_pod(p, by_name[p.node], j) for j, p in enumerate(cluster.bound)])
    return snapshot(cluster.nodes, workloads, usage=usage)


def _raw_pod(pod: Bound, host: Node, number: int) -> dict[str, Any]:
    """The pod as the API server lists it: the spec's GPU resources, the record as an annotation."""
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi", GPU_RESOURCE: str(len(pod.gpus))}
    if pod.share:
        if pod.cores:
            requests[GPU_CORES_RESOURCE] = str(pod.cores)
        if pod.mem:
            requests[GPU_MEM_RESOURCE] = str(pod.mem)
    annotations = {}
    if pod.recorded and host.hami:
        devices = ":".join(f"{host.gpu_uuids[g]},NVIDIA,{pod.mem},{pod.cores}" for g in pod.gpus)
        annotations[HAMI_ALLOCATED_ANNOTATION] = devices + ":;"
    elif pod.recorded:
        annotations[GPUS_ANNOTATION] = ",".join(str(g) for g in pod.gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bound{number}", "namespace": "run", "annotations": annotations},
        "spec": {
            "nodeName": pod.node,
            "containers": [{"name": "main", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running"},
    }


# -- the recount --------------------------------------------------------------------------------


@dataclass
class Load:
    """One node as the recount sees it: what the bound pods on record and the plan put on each GPU."""

    host: Node
    milli: dict[int, int] = field(default_factory=dict)
    mem: dict[int, int] = field(default_factory=dict)
    tasks: dict[int, int] = field(default_factory=dict)
    busy: set[int] = field(default_factory=set)
    """GPUs bound pods on record use."""
    unknown: int = 0
    """GPUs of bound pods without a record."""
    whole: set[int] = field(default_factory=set)
    shared: set[int] = field(default_factory=set)
    unindexed: int = 0
    cpu: int = 0

    def add(self, gpu: int, milli: int, mem: int) -> None:
        self.milli[gpu] = self.milli.get(gpu, 0) + milli
        self.mem[gpu] = self.mem.get(gpu, 0) + mem
        self.tasks[gpu] = self.tasks.get(gpu, 0) + 1


def _loads(cluster: Cluster) -> dict[str, Load]:
    loads = {n.name: Load(n) for n in cluster.nodes}
    for pod in cluster.bound:
        load = loads[pod.node]
        load.cpu += 1000
        if not pod.recorded:
            load.unknown += len(pod.gpus)
            continue
        for g in pod.gpus:
            load.add(g, pod.milli, pod.mem)
            load.busy.add(g)
    return loads


def overcommitted(snap: Snapshot, cluster: Cluster, plan: Plan) -> list[str]:
    """What the plan over-commits or promises wrongly, counted from the bound pods themselves."""
    requests = {(w.key, ps.name): ps.request for w in snap.workloads for ps in w.pod_sets}
    loads = _loads(cluster)
    before = {name: (set(load.busy), load.unknown) for name, load in loads.items()}
    problems = []
    for decision in plan.admitted:
        for ps in decision.pod_sets:
            req = requests[(decision.name, ps.name)]
            for pod in ps.pods:
                where = f"{decision.name} pod {pod.index} on {pod.node}"
                problems += _book(loads[pod.node], req, pod.gpus, where)
    for name, load in loads.items():
        problems += _node_problems(load, *before[name])
    return problems


def _book(load: Load, req: PodRequest, gpus: tuple[int, ...] | None, where: str) -> list[str]:
    load.cpu += req.cpu_milli
    if not req.gpus:
        return [f"{where}: GPUs {gpus} for a pod asking for none"] if gpus else []
    if not gpus:
        load.unindexed += req.gpus
        if not load.unknown and not req.is_share:
            return [f"{where}: no indices, though every in-use GPU has a known index"]
        if req.is_share and (req.gpus > 1 or not load.unknown):
            return [f"{where}: a share of {req.gpus} GPUs left to the node ({load.unknown} unknown)"]
        return []
    problems = [] if len(set(gpus)) == req.gpus else [f"{where}: GPUs {gpus} for {req.gpus} devices"]
    if not req.is_share:
        if load.unknown:
            problems.append(f"{where}: whole GPUs {gpus} promised beside GPUs of unknown index")
        taken = set(gpus) & (load.busy | load.whole | load.shared)
        problems += [f"{where}: GPUs {sorted(taken)} given whole are in use"] if taken else []
        load.whole |= set(gpus)
        return problems
    if set(gpus) & load.whole:
        problems.append(f"{where}: shares on GPUs {gpus} given whole")
    if load.unknown and not set(gpus) <= load.busy:
        problems.append(f"{where}: shares promised on untouched GPUs {gpus} beside GPUs of unknown index")
    memory = req.gpu_mem_mib or MEMORY * req.gpu_mem_percent // 100 or (MEMORY if load.host.hami else 0)
    for g in gpus:
        load.add(g, req.gpu_milli, memory)
        load.shared.add(g)
    return problems


def _node_problems(load: Load, busy_before: set[int], unknown: int) -> list[str]:
    name, host = load.host.name, load.host
    problems = [f"{name}: CPU {load.cpu}m of {CPU}m"] if load.cpu > CPU else []
    for g, milli in load.milli.items():
        if milli > FULL_GPU_MILLI:
            problems.append(f"{name} GPU {g}: compute {milli}")
        if load.mem[g] > MEMORY:
            problems.append(f"{name} GPU {g}: memory {load.mem[g]} MiB")
        if host.hami and load.tasks[g] > host.gpu_split:
            problems.append(f"{name} GPU {g}: {load.tasks[g]} tasks, split {host.gpu_split}")
    known = len(load.busy | load.whole | load.shared)
    taken, was = known + unknown + load.unindexed, len(busy_before) + unknown
    if taken > host.gpu_count and taken > was:
        problems.append(f"{name}: {taken} GPUs busy ({unknown} of unknown index), {host.gpu_count} exist")
    return problems


# -- the property -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_clusters())
def test_no_policy_overcommits_gpus_of_unknown_index_beside_shares_of_several_gpus(
    case: tuple[Snapshot, Cluster],
) -> None:
    snap, cluster = case
    for policy in POLICIES:
        plan = planning.plan(snap, SETTINGS, policy)  # check_plan passed, or it raised
        assert overcommitted(snap, cluster, plan) == [], policy
        assert plan.status != PlanStatus.FALLBACK, plan.warnings


def test_the_recount_finds_what_a_plan_over_commits_or_promises_wrongly() -> None:
    """A share past a GPU's compute, and a whole GPU promised by index beside a GPU of unknown index."""
    host = _gpu_node("n0", 3, hami=False, split=0)
    known_share = Bound("n0", (0,), share=True, cores=70, mem=0, recorded=True)
    unknown_whole = Bound("n0", (1,), share=False, cores=100, mem=MEMORY, recorded=False)
    cluster = Cluster([host], [known_share, unknown_whole])
    jobs = [workload("share", pods(1, 1, gpu_milli=500)), workload("whole", pods(1, 1))]
    snap = _snapshot(cluster, jobs)
    placed = {
        "share": PodPlacement(index=0, node="n0", gpus=(0,)),
        "whole": PodPlacement(index=0, node="n0", gpus=(2,)),
    }
    plan = Plan(
        status=PlanStatus.HEURISTIC,
        policy="test",
        workloads=[
            WorkloadDecision(
                name=f"default/{name}", decision="admit", pod_sets=[PodSetPlacement(name="main", pods=[pod])]
            )
            for name, pod in placed.items()
        ],
    )
    assert overcommitted(snap, cluster, plan) == [
        "default/whole pod 0 on n0: whole GPUs (2,) promised beside GPUs of unknown index",
        "n0 GPU 0: compute 1200",
    ]
