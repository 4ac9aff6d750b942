"""The trace replay follows the FGD method, never overcommits a node, and reports consistent metrics."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from optsched.bench.batch import BatchPlacer
from optsched.bench.trace import SeedRun, idle_breakdown, inflate, replay, run_policy_seeds, trace_shapes
from optsched.bench.trace_data import TracePod, load_nodes, load_pods
from optsched.capacity.fragmentation import products_of
from optsched.capacity.state import NodeState
from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.policies.choosers import make_chooser


def _capacity(trace_dir: Path) -> int:
    return sum(FULL_GPU_MILLI * n.gpu_count for n in load_nodes(trace_dir))


def test_inflation_reaches_130_percent_with_every_task_once_first(trace_dir: Path) -> None:
    pods = load_pods(trace_dir, "default")
    capacity = _capacity(trace_dir)
    arrivals = inflate(pods, capacity, 1.3, random.Random(42))
    total = sum(p.request.gpu_milli_total for p in arrivals)
    biggest = max(p.request.gpu_milli_total for p in pods)
    assert 1.3 * capacity - biggest < total <= 1.3 * capacity
    assert sorted(p.name for p in arrivals[: len(pods)]) == sorted(p.name for p in pods)
    assert [p.name for p in arrivals[: len(pods)]] != sorted(p.name for p in pods)  # shuffled
    assert arrivals == inflate(pods, capacity, 1.3, random.Random(42))  # seeded


def _recheck(nodes: list[NodeState], arrivals: list[TracePod], run: SeedRun, capacity: int) -> None:
    """Re-apply every placement to fresh node states, checking each one independently."""
    assert run.placed_pods + run.failed_pods == run.arrived_pods == len(arrivals)
    states = [n.copy() for n in nodes]
    placed_milli = 0
    for placement in run.placements:
        req = arrivals[placement.pod].request
        if placement.node < 0:
            continue
        node = states[placement.node]
        allowed = products_of(req)
        assert not allowed or node.product in allowed
        assert node.cpu >= req.cpu_milli and node.mem >= req.memory_mib
        assert len(placement.gpus) == req.gpus == len(set(placement.gpus))
        for gpu in placement.gpus:
            need = req.gpu_milli if req.is_share else FULL_GPU_MILLI
            assert node.gpu_milli[gpu] >= need
        node.take(req, list(placement.gpus))
        placed_milli += req.gpu_milli_total
    assert all(s.cpu >= 0 and s.mem >= 0 and min(s.gpu_milli, default=0) >= 0 for s in states)
    assert capacity - sum(s.free_gpu_milli for s in states) == placed_milli


@pytest.mark.parametrize("policy", ["fgd", "bestfit", "firstfit", "random"])
def test_every_placement_respects_node_capacity(trace_dir: Path, policy: str) -> None:
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, "default")
    shapes = trace_shapes(pods)
    arrivals = inflate(pods, _capacity(trace_dir), 1.3, random.Random(7))
    chooser = make_chooser(policy, shapes, seed=7 if policy == "random" else None, authors_scoring=True)
    run = replay(
        nodes, arrivals, chooser, shapes, policy=policy, seed=7, workload="default", keep_placements=True
    )
    assert run.failed_pods > 0  # 130% of capacity cannot all fit
    _recheck(nodes, arrivals, run, _capacity(trace_dir))


def test_batch_placements_respect_node_capacity(trace_dir: Path) -> None:
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, "default")
    shapes = trace_shapes(pods)
    arrivals = inflate(pods, _capacity(trace_dir), 1.3, random.Random(3))
    placer = BatchPlacer(shapes, time_limit_s=0.1, workers=1, seed=3)
    run = replay(
        nodes,
        arrivals,
        None,
        shapes,
        policy="optimizer",
        seed=3,
        workload="default",
        batch=48,
        batch_placer=placer,
        keep_placements=True,
    )
    _recheck(nodes, arrivals, run, _capacity(trace_dir))
    assert run.placed_pods > len(arrivals) // 2
    assert len(run.latencies_s) == len(range(0, len(arrivals), 48))


def test_metrics_add_up(trace_dir: Path) -> None:
    (run,) = run_policy_seeds(trace_dir, "default", "fgd", [42], show_progress=False)
    assert len(run.allocated_pct) == len(run.fragmentation_pct) == len(run.frag_rate_pct) == 131
    seen = 0
    for k in range(131):
        allocated = run.allocated_pct[k]
        if allocated is None:
            continue
        seen += 1
        unallocated = run.unallocated_pct(k)
        assert unallocated is not None and allocated + unallocated == pytest.approx(100.0)
        assert 0.0 <= allocated <= min(100.0, k + 2.0)  # never more than has arrived (bins are +-0.5%)
        frag, rate = run.fragmentation_pct[k], run.frag_rate_pct[k]
        assert frag is not None and rate is not None
        assert 0.0 <= frag <= unallocated + 1e-9  # only idle GPUs can be fragmented
        assert 0.0 <= rate <= 100.0 + 1e-9
    assert seen > 100
    assert run.allocated_pct[130] is not None and run.allocated_pct[130] > 50.0
    assert len(run.latencies_s) == run.arrived_pods
    # The end-of-replay idle breakdown accounts for every idle GPU (the 130% bin averages its last records).
    idle = run.idle_whole_gpus + sum(run.idle_sliver_gpus)
    assert len(run.idle_sliver_gpus) == 4 and min(run.idle_sliver_gpus) >= 0.0
    assert 100.0 * idle / run.capacity_gpus == pytest.approx(100.0 - run.allocated_pct[130], abs=0.5)


def test_idle_breakdown_sorts_free_capacity_into_whole_gpus_and_slivers() -> None:
    node = NodeState(
        name="n",
        product="T4",
        cpu=8_000,
        mem=8_192,
        pods=10,
        gpu_milli=[1000, 190, 40, 600, 0, 1000],
        gpu_mem=[0] * 6,
        gpu_mem_total=0,
        islands=[(i,) for i in range(6)],
        healthy=[True, True, True, True, True, False],
    )
    whole, slivers = idle_breakdown([node])
    # The broken GPU's capacity is not idle capacity; the used-up GPU has none left.
    assert whole == 1.0
    assert slivers == [0.04, 0.19, 0.0, 0.6]
