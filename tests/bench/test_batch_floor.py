"""The share-packing floor is a true lower bound and is binned like the replay's metrics."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.bench.batch_floor import (
    best_fit_decreasing_bins,
    end_ceiling,
    floor_at,
    main,
    min_bins_lower_bound,
    share_milli,
    trace_floors,
)
from optsched.bench.trace import inflate, replay, trace_shapes
from optsched.bench.trace_data import TracePod, load_nodes, load_pods
from optsched.capacity.fragmentation import ProductRequest
from optsched.capacity.state import NodeState
from optsched.errors import InputError
from optsched.model.snapshot import FULL_GPU_MILLI
from optsched.policies.choosers import make_chooser


def _pod(name: str, gpus: int, milli: int) -> TracePod:
    return TracePod(name, ProductRequest(cpu_milli=1000, memory_mib=1024, gpus=gpus, gpu_milli=milli))


def test_lower_bound_counts_shares_that_cannot_pair() -> None:
    # Three 0.6-GPU shares fill 1.8 GPUs but no two fit on one GPU: three GPUs, not two.
    assert min_bins_lower_bound(Counter({600: 3})) == 3
    assert min_bins_lower_bound(Counter({500: 2})) == 1
    assert min_bins_lower_bound(Counter()) == 0


def test_best_fit_decreasing_pairs_complements() -> None:
    assert best_fit_decreasing_bins([400, 600, 500, 500]) == 2
    assert best_fit_decreasing_bins([810, 810, 190]) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=999), max_size=40))
def test_lower_bound_sits_between_the_volume_bound_and_a_real_packing(sizes: list[int]) -> None:
    bound = min_bins_lower_bound(Counter(sizes))
    assert math.ceil(sum(sizes) / FULL_GPU_MILLI) <= bound <= best_fit_decreasing_bins(sizes)


def test_floor_is_the_sliver_waste_at_the_binned_arrival() -> None:
    # 10 GPUs; five 0.6 shares then seven whole GPUs: arrival reaches exactly 100% with the last task.
    arrivals = [_pod(f"s{i}", 1, 600) for i in range(5)] + [_pod(f"w{i}", 1, 1000) for i in range(7)]
    floor = floor_at(arrivals, 10 * FULL_GPU_MILLI, 100, seed=7)
    assert floor.seed == 7
    assert floor.shares == 5
    assert floor.lower_bound_pct == pytest.approx(20.0)  # five GPUs each 0.4 idle, of ten
    assert floor.best_fit_decreasing_pct == pytest.approx(20.0)


def test_whole_and_multi_gpu_tasks_are_not_shares() -> None:
    assert share_milli(_pod("a", 1, 1000)) is None
    assert share_milli(_pod("b", 2, 1000)) is None
    assert share_milli(_pod("c", 0, 0)) is None
    assert share_milli(_pod("d", 1, 470)) == 470


def test_floor_needs_a_record_at_the_percentage() -> None:
    with pytest.raises(InputError, match="100%"):
        floor_at([_pod("s", 1, 500)], 10 * FULL_GPU_MILLI, 100)


def test_a_replay_never_packs_its_shares_onto_fewer_gpus_than_the_bound(trace_dir: Path) -> None:
    nodes = load_nodes(trace_dir)
    pods = load_pods(trace_dir, "default")
    capacity = sum(FULL_GPU_MILLI * n.gpu_count for n in nodes)
    rng = random.Random(42)
    order = list(nodes)
    rng.shuffle(order)
    arrivals = inflate(pods, capacity, 1.3, rng)
    shapes = trace_shapes(pods)
    chooser = make_chooser("fgd", shapes, authors_scoring=True)
    run = replay(
        order, arrivals, chooser, shapes, policy="fgd", seed=42, workload="default", keep_placements=True
    )
    placed: Counter[int] = Counter()
    hosts: set[tuple[int, int]] = set()
    for placement in run.placements:
        share = share_milli(arrivals[placement.pod])
        if share is not None and placement.node >= 0:
            placed[share] += 1
            hosts.add((placement.node, placement.gpus[0]))
    assert placed
    assert len(hosts) >= min_bins_lower_bound(placed)


def test_trace_floors_follow_the_replay_arrivals_per_seed(trace_dir: Path) -> None:
    floors = trace_floors(trace_dir, "default", [42, 43])
    assert [f.seed for f in floors] == [42, 43]
    for f in floors:
        assert 0.0 <= f.lower_bound_pct <= f.best_fit_decreasing_pct


def test_main_prints_a_table_and_rejects_a_missing_trace(
    trace_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--trace-dir", str(trace_dir), "--seeds", "42-43"]) == 0
    out = capsys.readouterr().out
    assert "| 42 |" in out and "mean ± sd" in out
    assert main(["--trace-dir", str(tmp_path / "missing"), "--seeds", "42"]) == 2
    assert "not found" in capsys.readouterr().err


def _ceiling_case() -> list[TracePod]:
    """10 GPUs: four 0.8 shares and six whole GPUs (92%), then a 0.1 and a 0.3 share and three whole GPUs."""
    early = [_pod(f"s{i}", 1, 800) for i in range(4)] + [_pod(f"w{i}", 1, 1000) for i in range(6)]
    late = [_pod("f1", 1, 100), _pod("f3", 1, 300)] + [_pod(f"x{i}", 1, 1000) for i in range(3)]
    return early + late


def test_end_ceiling_counts_remainders_only_smaller_shares_can_fill() -> None:
    ceiling = end_ceiling(_ceiling_case(), 10 * FULL_GPU_MILLI, seed=3)
    # Four remainders of 0.2 GPU; only the 0.1 share is small enough to go into one.
    assert (ceiling.seed, ceiling.threshold_milli, ceiling.big_shares) == (3, 800, 4)
    assert ceiling.idle_floor_pct == pytest.approx(7.0)
    assert ceiling.allocated_ceiling_pct == pytest.approx(93.0)
    # Shares arriving after the cut-off are not assumed placed: by 10% arrival only the first has come.
    first = end_ceiling(_ceiling_case(), 10 * FULL_GPU_MILLI, placed_by=10)
    assert (first.big_shares, first.idle_floor_pct) == (1, pytest.approx(1.0))
    assert end_ceiling(_ceiling_case(), 10 * FULL_GPU_MILLI, placed_by=5).idle_floor_pct == 0.0


def test_a_replay_that_places_the_big_shares_stays_under_the_ceiling() -> None:
    nodes = [
        NodeState(
            name=f"n{i}",
            product="T4",
            cpu=64_000,
            mem=262_144,
            pods=100,
            gpu_milli=[1000, 1000],
            gpu_mem=[0, 0],
            gpu_mem_total=0,
            islands=[(0,), (1,)],
            healthy=[True, True],
        )
        for i in range(5)
    ]
    arrivals = _ceiling_case()
    shapes = trace_shapes(arrivals)
    for policy in ("fgd", "bestfit", "firstfit"):
        chooser = make_chooser(policy, shapes, authors_scoring=True)
        run = replay(nodes, arrivals, chooser, shapes, policy=policy, seed=0, workload="case")
        assert run.placed_pods >= 4  # the four big shares came first and all fit
        idle_pct = 100.0 * (run.idle_whole_gpus + sum(run.idle_sliver_gpus)) / run.capacity_gpus
        assert idle_pct >= end_ceiling(arrivals, 10 * FULL_GPU_MILLI).idle_floor_pct - 1e-9
