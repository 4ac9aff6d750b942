"""The contended scale instance: demand over free capacity, fragmentation, gangs, node kinds, seeds."""

from __future__ import annotations

import pytest

from optsched.bench.scale import contended_cluster, synthetic_cluster
from optsched.bench.scale_cluster import GB200, MAX_GANG, MIN_GANG, PRIORITIES, demand_ratio
from optsched.bench.topology_cluster import BLOCK, RACK
from optsched.capacity.state import ClusterState
from optsched.model.names import CLIQUE_LABEL
from optsched.model.snapshot import Snapshot


@pytest.fixture(scope="module", params=[1, 2, 3])
def thousand(request: pytest.FixtureRequest) -> Snapshot:
    return contended_cluster(1000, 1000, request.param)


def test_demand_is_one_point_two_to_one_point_five_times_the_free_gpus(thousand: Snapshot) -> None:
    assert 1.2 <= demand_ratio(thousand) <= 1.5


def test_ratio_holds_on_a_small_instance_too() -> None:
    for seed in range(1, 6):
        assert 1.2 <= demand_ratio(contended_cluster(48, 40, seed)) <= 1.5


def test_free_capacity_is_fragmented(thousand: Snapshot) -> None:
    state = ClusterState.from_snapshot(thousand)
    partly = [n for n in state.nodes if 0 < n.free_gpu_milli < 1000 * n.gpu_count]
    assert 0.3 <= len(partly) / len(state.nodes) <= 0.7
    assert any(u.unknown_index_gpus for u in thousand.usage.values())
    assert any(u.gpu_milli and 0 < min(m for m in u.gpu_milli if m) < 1000 for u in thousand.usage.values())


def test_gangs_have_two_to_sixty_four_pods_and_ask_for_topology(thousand: Snapshot) -> None:
    sets = [ps for w in thousand.workloads for ps in w.pod_sets]
    gangs = [ps for ps in sets if ps.count > 1]
    assert gangs and all(MIN_GANG <= ps.count <= MAX_GANG for ps in gangs)
    assert max(ps.count for ps in gangs) >= 32 and min(ps.count for ps in gangs) == 2
    assert {ps.required_topology for ps in gangs} >= {RACK, BLOCK}
    assert {ps.preferred_topology for ps in gangs} >= {RACK, BLOCK}
    singles = [ps.request for ps in sets if ps.count == 1]
    assert {r.gpus for r in singles if not r.is_share} >= {1, 2, 4}
    assert any(r.is_share and r.gpu_milli < 1000 for r in singles)
    assert {w.priority for w in thousand.workloads} == set(PRIORITIES)


def test_every_node_kind_is_present_at_a_thousand_nodes(thousand: Snapshot) -> None:
    islands = {(n.product, n.gpu_count, tuple(len(i) for i in n.nvlink_islands)) for n in thousand.nodes}
    assert {p for p, _, _ in islands} == {
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA-H200",
        "NVIDIA-A100-PCIE-40GB",
        GB200,
    }
    assert ("NVIDIA-A100-PCIE-40GB", 8, (2, 2, 2, 2)) in islands
    assert ("NVIDIA-H200", 8, (8,)) in islands
    cliques = {n.labels.get(CLIQUE_LABEL) for n in thousand.nodes if n.product == GB200}
    assert None not in cliques and cliques


def test_same_seed_same_snapshot_other_seed_other_snapshot() -> None:
    assert contended_cluster(200, 150, 7) == contended_cluster(200, 150, 7)
    assert contended_cluster(200, 150, 7) != contended_cluster(200, 150, 8)


def test_classic_queue_stays_importable_and_unchanged_in_shape() -> None:
    snapshot = synthetic_cluster(64, 50, 1)
    assert len(snapshot.nodes) == 64 and len(snapshot.workloads) == 50
    assert all(n.gpu_count == 8 for n in snapshot.nodes)
