"""The scale bounds: exact on hand-built cases, never beaten by any policy on small contended instances."""

from __future__ import annotations

import pytest

from optsched import planning
from optsched.bench.scale_bounds import ScaleBounds, scale_bounds
from optsched.bench.scale_cluster import contended_cluster
from optsched.bench.scale_figures import Figures, figures
from optsched.bench.scale_report import METRICS
from optsched.model.snapshot import NodeUsage, Snapshot
from optsched.settings import Settings
from optsched.validate import check_plan
from tests.builders import A100, RACK, node, pods, snapshot, workload

EPS = 1e-9


def test_gpus_bound_admits_workloads_whole() -> None:
    # Three 6-GPU pods on two free 8-GPU nodes: 16 GPUs free, but at most two pods fit.
    snap = snapshot([node("a"), node("b")], [workload(f"w{i}", pods(1, 6)) for i in range(3)])
    assert scale_bounds(snap).gpus_admitted == 12


def test_gpus_bound_counts_whole_multiples_per_node() -> None:
    # Two nodes with 6 whole GPUs free each hold one 4-GPU pod apiece, not three between them.
    usage = {n: NodeUsage(unknown_index_gpus=2) for n in ("a", "b")}
    snap = snapshot([node("a"), node("b")], [workload(f"w{i}", pods(1, 4)) for i in range(3)], usage=usage)
    assert scale_bounds(snap).gpus_admitted == 8


def test_a_workload_that_fits_nowhere_adds_nothing() -> None:
    # Three 8-GPU pods that require one rack whose two nodes hold only two of them.
    nodes = [node("a", rack="r1"), node("b", rack="r1"), node("c", rack="r2")]
    gang = workload("gang", pods(3, 8, required_topology=RACK))
    bounds = scale_bounds(snapshot(nodes, [gang, workload("one", pods(1, 2))]))
    assert bounds.gpus_admitted == 2
    assert not bounds.workloads["default/gang"].products


def test_racks_and_blocks_floor_from_free_capacity_per_domain() -> None:
    nodes = [
        node("a", rack="r1", block="b1"),
        node("b", rack="r1", block="b1"),
        node("c", rack="r2", block="b1"),
        node("d", rack="r3", block="b2"),
    ]
    bounds = scale_bounds(snapshot(nodes, [workload("g3", pods(3, 8)), workload("g4", pods(4, 8))]))
    assert bounds.workloads["default/g3"].racks == 2
    assert bounds.workloads["default/g3"].blocks == 1
    assert bounds.workloads["default/g4"].racks == 3
    assert bounds.workloads["default/g4"].blocks == 2
    assert bounds.racks_per_gang(["default/g3", "default/g4"]) == 2.5


def test_nvlink_bound_knows_pairs_and_island_room() -> None:
    pairs = [[0, 1], [2, 3], [4, 5], [6, 7]]
    a100 = node("p", product=A100, islands=pairs, gpu_mem=40_960)
    snap = snapshot([a100], [workload("four", pods(1, 4)), workload("two", pods(1, 2))])
    bounds = scale_bounds(snap)
    assert bounds.nvlink_hit(["default/four"]) == 0.0
    assert bounds.nvlink_hit(["default/four", "default/two"]) == 0.5
    # One free 8-GPU island holds one 8-GPU pod, so of two such pods at most one hits.
    snap = snapshot([node("h")], [workload(f"w{i}", pods(1, 8)) for i in range(2)])
    assert scale_bounds(snap).nvlink_hit(["default/w0", "default/w1"]) == 0.5


def test_nvlink_bound_counts_the_gpus_hits_take() -> None:
    # One free island of 8: a 2-GPU pod and one 4-GPU pod hit; the second 4-GPU pod finds 2 GPUs left.
    snap = snapshot([node("h")], [workload("two", pods(1, 2)), workload("fours", pods(2, 4))])
    assert scale_bounds(snap).nvlink_hit(["default/two", "default/fours"]) == pytest.approx(2 / 3)


@pytest.fixture(scope="module", params=[1, 2, 3])
def planned(request: pytest.FixtureRequest) -> tuple[Snapshot, ScaleBounds, list[Figures]]:
    snap = contended_cluster(40, 36, request.param)
    bounds = scale_bounds(snap)
    settings = Settings(time_limit_s=0.5, workers=1, deterministic_time=True)
    out = []
    for policy in ("optimizer", "bestfit", "fgd", "tas", "leastallocated", "firstfit"):
        plan = planning.plan(snap, settings, policy, check=False)
        out.append(figures(snap, plan, bounds, wall_seconds=0.0, invalid=len(check_plan(snap, plan))))
    return snap, bounds, out


def test_no_policy_beats_any_bound(planned: tuple[Snapshot, ScaleBounds, list[Figures]]) -> None:
    _, bounds, results = planned
    for f in results:
        assert f.invalid == 0, f.policy
        assert f.gpus_admitted <= bounds.gpus_admitted + EPS, f.policy
        for metric in METRICS[1:]:
            value, bound = metric.value(f), metric.own_bound(f)
            if value is None:
                continue
            assert bound is not None, (f.policy, metric.key)
            if metric.higher_is_better:
                assert value <= bound + EPS, (f.policy, metric.key, value, bound)
            else:
                assert value >= bound - EPS, (f.policy, metric.key, value, bound)


def test_instances_have_gangs_and_multi_gpu_pods_to_bound(
    planned: tuple[Snapshot, ScaleBounds, list[Figures]],
) -> None:
    _, bounds, results = planned
    assert any(f.racks_per_gang is not None for f in results)
    assert any(f.nvlink_hit is not None for f in results)
    assert bounds.gpus_admitted < sum(f.demand_milli for f in bounds.workloads.values()) / 1000
