"""FGD fragmentation on hand-computed nodes."""

from __future__ import annotations

import pytest

from optsched.capacity.fragmentation import (
    FragMeter,
    ProductRequest,
    cluster_fragmentation,
    node_fragmentation,
    stranded_gpus,
    typical_shapes,
)
from optsched.capacity.state import ClusterState, NodeState
from optsched.model.snapshot import NodeUsage, PodRequest
from tests.builders import H100, T4, node

WHOLE = PodRequest(cpu_milli=1000, gpus=1)
SHARE_400 = PodRequest(cpu_milli=1000, gpus=1, gpu_milli=400)
CPU_ONLY = PodRequest(cpu_milli=1000)


def partly_used() -> NodeState:
    """8 GPUs free 1000, 1000, 500, 300, 0, 0, 0, 0 milli: 2.8 GPUs free."""
    usage = NodeUsage(gpu_milli=(0, 0, 500, 700, 1000, 1000, 1000, 1000))
    return NodeState.from_node(node("n1", gpus=8), usage)


def test_whole_gpu_shape_counts_partial_leftovers() -> None:
    assert node_fragmentation(partly_used(), [(WHOLE, 1.0)]) == pytest.approx(0.8)


def test_share_shape_counts_leftovers_below_its_demand() -> None:
    assert node_fragmentation(partly_used(), [(SHARE_400, 1.0)]) == pytest.approx(0.3)


def test_cpu_only_shape_counts_all_free_gpu() -> None:
    assert node_fragmentation(partly_used(), [(CPU_ONLY, 1.0)]) == pytest.approx(2.8)


def test_shape_that_does_not_fit_counts_all_free_gpu() -> None:
    four = PodRequest(cpu_milli=1000, gpus=4)
    too_much_cpu = PodRequest(cpu_milli=10_000_000, gpus=1)
    assert node_fragmentation(partly_used(), [(four, 1.0)]) == pytest.approx(2.8)
    assert node_fragmentation(partly_used(), [(too_much_cpu, 1.0)]) == pytest.approx(2.8)


def test_wrong_product_counts_all_free_gpu() -> None:
    t4_only = ProductRequest(cpu_milli=1000, gpus=1, products=frozenset({T4}))
    h100_ok = ProductRequest(cpu_milli=1000, gpus=1, products=frozenset({H100}))
    assert node_fragmentation(partly_used(), [(t4_only, 1.0)]) == pytest.approx(2.8)
    assert node_fragmentation(partly_used(), [(h100_ok, 1.0)]) == pytest.approx(0.8)


def test_weighted_over_shapes() -> None:
    shapes = [(WHOLE, 0.5), (SHARE_400, 0.25), (CPU_ONLY, 0.25)]
    assert node_fragmentation(partly_used(), shapes) == pytest.approx(0.5 * 0.8 + 0.25 * 0.3 + 0.25 * 2.8)


def test_full_node_has_no_fragmentation() -> None:
    usage = NodeUsage(gpu_milli=(1000,) * 8)
    full = NodeState.from_node(node("n1", gpus=8), usage)
    assert node_fragmentation(full, [(CPU_ONLY, 1.0)]) == 0.0


def test_after_does_not_change_the_node_and_matches_a_real_take() -> None:
    meter = FragMeter([(WHOLE, 1.0)])
    state = partly_used()
    predicted = meter.after(state, SHARE_400, [2])
    assert state.gpu_milli[2] == 500
    state.take(SHARE_400, [2])
    assert meter.node(state) == pytest.approx(predicted) == pytest.approx(0.4)


def test_cluster_sum_and_stranded() -> None:
    no_cpu = NodeState.from_node(node("n2", gpus=2, cpu=1000), NodeUsage(cpu_milli=1000))
    cluster = ClusterState([partly_used(), no_cpu])
    shapes = [(WHOLE, 1.0)]
    assert cluster_fragmentation(cluster, shapes) == pytest.approx(0.8 + 2.0)
    assert stranded_gpus(cluster, shapes) == 2


def test_typical_shapes_cover_and_renormalise() -> None:
    a = PodRequest(cpu_milli=1000, gpus=1)
    b = PodRequest(cpu_milli=2000, gpus=1, gpu_milli=500)
    c = PodRequest(cpu_milli=3000)
    requests = [a] * 6 + [b] * 3 + [c]
    shapes = typical_shapes(requests, coverage=0.8)
    assert [(r, round(w, 6)) for r, w in shapes] == [(a, round(6 / 9, 6)), (b, round(3 / 9, 6))]
    everything = typical_shapes(requests)
    assert len(everything) == 3
    assert sum(w for _, w in everything) == pytest.approx(1.0)
    assert typical_shapes(requests, limit=1) == [(a, 1.0)]
    assert typical_shapes([]) == []
