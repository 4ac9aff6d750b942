"""Property: on small random HAMi nodes, no plan over-commits a GPU's memory, compute or split count."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import planning
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import FULL_GPU_MILLI, Node, NodeUsage, PodRequest, PodSet, Snapshot
from optsched.validate import check_plan
from tests.builders import snapshot, workload
from tests.solver.helpers import FAST

MEMORY = 16_384


@st.composite
def hami_clusters(draw: st.DrawFn) -> Snapshot:
    nodes, usage = [], {}
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.integers(1, 4))
        split = draw(st.sampled_from([2, 3, 10]))
        name = f"h{i}"
        nodes.append(
            Node(
                name=name,
                cpu_milli=64_000,
                memory_mib=262_144,
                gpu_count=gpus,
                gpu_product="NVIDIA-A10",
                gpu_memory_mib=MEMORY,
                gpu_split=split,
                gpu_uuids=tuple(f"GPU-{i}-{g}" for g in range(gpus)),
                hami=True,
            )
        )
        mem, milli, tasks = [], [], []
        for _ in range(gpus):
            used = draw(st.sampled_from([0, 0, 4096, 8192, MEMORY]))
            mem.append(used)
            milli.append(FULL_GPU_MILLI if used == MEMORY else draw(st.sampled_from([0, 300])) if used else 0)
            tasks.append(draw(st.integers(1, split)) if used else 0)
        usage[name] = NodeUsage(gpu_milli=tuple(milli), gpu_mem_mib=tuple(mem), gpu_tasks=tuple(tasks))
    workloads = []
    for j in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["whole", "mem", "cores", "percent"]))
        gpus = draw(st.integers(1, 3))
        request = PodRequest(cpu_milli=1000, gpus=gpus)
        if kind == "mem":
            request = PodRequest(
                cpu_milli=1000, gpus=gpus, gpu_milli=0, gpu_mem_mib=draw(st.sampled_from([2048, 6000]))
            )
        elif kind == "cores":
            request = PodRequest(cpu_milli=1000, gpus=gpus, gpu_milli=draw(st.sampled_from([200, 500])))
        elif kind == "percent":
            request = PodRequest(
                cpu_milli=1000, gpus=gpus, gpu_milli=250, gpu_mem_percent=draw(st.sampled_from([25, 50]))
            )
        count = draw(st.integers(1, 3))
        workloads.append(workload(f"w{j}", PodSet(name="main", count=count, request=request)))
    return snapshot(nodes, workloads, usage=usage)


def overcommitted(snap: Snapshot, plan: Plan) -> list[str]:
    """GPUs the plan over-commits or gives one pod twice, counted here from the raw figures."""
    requests = {(w.key, ps.name): ps.request for w in snap.workloads for ps in w.pod_sets}
    added: dict[tuple[str, int], list[int]] = {}
    problems = []
    for decision in plan.admitted:
        for ps in decision.pod_sets:
            req = requests[(decision.name, ps.name)]
            for pod in ps.pods:
                gpus = list(pod.gpus or ())
                if len(set(gpus)) != req.gpus:
                    problems.append(f"{decision.name}: GPUs {gpus} for {req.gpus} devices")
                memory = MEMORY
                if req.is_share and (req.gpu_mem_mib or req.gpu_mem_percent):
                    memory = req.gpu_mem_mib or MEMORY * req.gpu_mem_percent // 100
                compute = req.gpu_milli if req.is_share else FULL_GPU_MILLI
                for g in gpus:
                    mem, milli, tasks = added.get((pod.node, g), [0, 0, 0])
                    added[(pod.node, g)] = [mem + memory, milli + compute, tasks + 1]
    split = {n.name: n.gpu_split for n in snap.nodes}
    for (name, g), (mem, milli, tasks) in added.items():
        usage = snap.usage_of(name)
        if usage.gpu_mem_mib[g] + mem > MEMORY:
            problems.append(f"{name} GPU {g}: memory {usage.gpu_mem_mib[g]} + {mem} MiB")
        if usage.gpu_milli[g] + milli > FULL_GPU_MILLI:
            problems.append(f"{name} GPU {g}: compute {usage.gpu_milli[g]} + {milli}")
        if usage.gpu_tasks[g] + tasks > split[name]:
            problems.append(f"{name} GPU {g}: {usage.gpu_tasks[g]} + {tasks} tasks")
    return problems


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hami_clusters(), st.sampled_from(["optimizer", "bestfit", "fgd", "firstfit", "tas"]))
def test_no_plan_overcommits_a_hami_gpu(snap: Snapshot, policy: str) -> None:
    """Whole pods, shares of one and several GPUs, percentages and HAMi's all-memory default."""
    plan = planning.plan(snap, FAST, policy)
    assert check_plan(snap, plan) == []
    assert overcommitted(snap, plan) == []
    assert plan.status != PlanStatus.FALLBACK, plan.warnings
