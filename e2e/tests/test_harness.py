"""The harness itself: profiles, pins, fallback and fault reporting.

These run without a cluster (a few need the built etcd binary or the Go
toolchain and skip without them), so a broken harness is caught before the
slower smoke tests start.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from e2e import build
from e2e.components import ComponentError, Ports, ProcessSet, etcd_args
from e2e.nodes import GPU_TOPOLOGY_ANNOTATION, node_objects
from e2e.profiles import ProfileError, load_profile, parse_profile
from e2e.versions import binary_path, read_pins, resolved_version


def test_small_profile_shape() -> None:
    profile = load_profile("small")
    nodes = {n["metadata"]["name"]: n for n in node_objects(profile)}
    assert len(nodes) == 20 and profile.gpu_count == 144
    labels = [n["metadata"]["labels"] for n in nodes.values()]
    assert len({lb["cloud.provider.com/topology-rack"] for lb in labels}) == 5
    assert len({lb["cloud.provider.com/topology-block"] for lb in labels}) == 3
    h100 = nodes["h100-000"]
    assert h100["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert h100["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert h100["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert "taints" not in h100["spec"]
    topo = json.loads(nodes["a100-003"]["metadata"]["annotations"][GPU_TOPOLOGY_ANNOTATION])
    assert topo["nvlinkIslands"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert topo["unhealthy"] == [7]
    # As NVIDIA's device plugin reports it: kubelet keeps the unhealthy GPU out of allocatable only.
    a100 = nodes["a100-003"]["status"]
    assert a100["capacity"]["nvidia.com/gpu"] == "8" and a100["allocatable"]["nvidia.com/gpu"] == "7"
    # A rack holds one kind of machine: H100 racks never contain A100s.
    racks: dict[str, set[str]] = {}
    for lb in labels:
        racks.setdefault(lb["cloud.provider.com/topology-rack"], set()).add(lb["nvidia.com/gpu.product"])
    assert all(len(products) == 1 for products in racks.values())


def test_the_small_profile_is_mixed_and_its_dra_nodes_have_no_device_plugin_capacity() -> None:
    profile = load_profile("small")
    assert [p.name for p in profile.pools_where(dra=True)] == ["h200"]
    assert [p.name for p in profile.pools_where(dra=False)] == ["h100", "a100", "t4"]
    nodes = {n["metadata"]["name"]: n for n in node_objects(profile)}
    h200 = nodes["h200-003"]
    labels = h200["metadata"]["labels"]
    assert labels["optsched.io/simulated-dra"] == "true"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H200" and labels["nvidia.com/gpu.count"] == "8"
    assert "nvidia.com/gpu" not in h200["status"]["capacity"]
    assert "nvidia.com/gpu" not in h200["status"]["allocatable"]
    assert labels["cloud.provider.com/topology-block"] == "block-02", "a new block: the others keep theirs"
    assert "optsched.io/simulated-dra" not in nodes["h100-000"]["metadata"]["labels"]


def test_the_large_dra_variant_is_the_large_fleet_with_every_gpu_pool_on_dra() -> None:
    large, dra = load_profile("large"), load_profile("large-dra")
    assert dra.name == "large-dra" and dra.node_count == large.node_count == 1000
    assert dra.gpu_count == large.gpu_count and not large.pools_where(dra=True)
    assert [p.name for p in dra.pools_where(dra=True)] == [p.name for p in large.pools_where(dra=False)]
    by_name = {n["metadata"]["name"]: n for n in node_objects(dra)}
    same = {n["metadata"]["name"]: n for n in node_objects(large)}
    assert set(by_name) == set(same)
    assert all("nvidia.com/gpu" not in n["status"]["capacity"] for n in by_name.values())


def test_a_profile_can_extend_only_a_profile(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("extends: nope\n")
    with pytest.raises(ProfileError, match="extends"):
        load_profile(str(bad))
    loop = tmp_path / "loop.yaml"
    loop.write_text(f"extends: {loop}\n")
    with pytest.raises(ProfileError, match="extends"):
        load_profile(str(loop))


def test_large_profile_has_1000_nodes_in_small_racks() -> None:
    profile = load_profile("large")
    nodes = node_objects(profile)
    assert len(nodes) == 1000
    per_rack: dict[str, int] = {}
    for n in nodes:
        rack = n["metadata"]["labels"]["cloud.provider.com/topology-rack"]
        per_rack[rack] = per_rack.get(rack, 0) + 1
    assert max(per_rack.values()) <= 32
    cliques = {n["metadata"]["labels"].get("nvidia.com/gpu.clique") for n in nodes} - {None}
    assert len(cliques) == 4  # 72 GB200 trays in NVL72 domains of 18


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"pools": []}, "missing field 'layout'"),
        ({"layout": {"nodesPerRack": 4, "racksPerBlock": 2}, "pools": [{"name": "a"}]}, "count"),
        (
            {
                "layout": {"nodesPerRack": 4, "racksPerBlock": 2},
                "pools": [{"name": "a", "count": 1, "gpu": {"product": "X", "count": 2, "memoryMiB": 1,
                                                             "nvlinkIslands": [[0, 5]]}}],
            },
            "nvlinkIslands",
        ),
        (
            {"layout": {"nodesPerRack": 4, "racksPerBlock": 2},
             "pools": [{"name": "c", "count": 1, "dra": True}]},
            "without GPUs",
        ),
    ],
)  # fmt: skip
def test_bad_profile_names_the_field(doc: dict[str, object], needle: str) -> None:
    with pytest.raises(ProfileError, match=needle):
        parse_profile(doc, "p.yaml")


def test_pins_file_is_complete() -> None:
    pins = read_pins()
    assert pins["KUBERNETES_VERSION"].startswith("v1.36.")
    assert pins["KUEUE_VERSION"].startswith("v0.19.")
    assert pins["ETCD_VERSION"].startswith("v3.6.")
    assert pins["KWOK_VERSION"].startswith("v0.8.")


def test_bad_pins_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "versions.env"
    bad.write_text("KUBERNETES_VERSION=v1.36.5\nnonsense\n")
    with pytest.raises(ValueError, match=r"versions.env:2"):
        read_pins(bad)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain and the module proxy")
def test_refused_version_falls_back_to_nearest_served() -> None:
    with tempfile.TemporaryDirectory() as td:
        r = build.resolve("kwok", "v0.8.99", Path(td))
    assert r.version.startswith("v0.8.") and r.version != "v0.8.99"
    assert r.fell_back and "not served" in r.note


def test_component_that_exits_early_is_named_with_its_log(tmp_path: Path) -> None:
    etcd = binary_path("etcd", resolved_version("etcd"))
    if not etcd.exists():
        pytest.skip("etcd not built (make e2e-build)")
    ports = Ports.pick()
    with socket.socket() as taken:  # occupy etcd's client port
        taken.bind(("127.0.0.1", ports.etcd))
        taken.listen()
        ps = ProcessSet(tmp_path)
        ps.start("etcd", etcd_args(etcd, tmp_path / "etcd", ports), tmp_path / "etcd.log")
        with pytest.raises(ComponentError) as err:
            for _ in range(100):
                ps.check()
                time.sleep(0.1)
        ps.stop_all()
    assert err.value.component == "etcd"
    assert "exited early" in str(err.value) and "address already in use" in str(err.value)
    assert not ProcessSet.load(tmp_path).procs
