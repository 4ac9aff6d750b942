"""The agent's API edge against a fake API server: what it writes, and that it writes only what changed."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from optsched.agent.metrics import AgentMetrics
from optsched.agent.profile import resolve_profiles
from optsched.agent.run import AgentRunner, without_nulls
from optsched.agent.serve import PROFILE_LABEL, AgentFactory, ServeOptions
from optsched.agent.simulated import inject_xid
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from tests.kube.fake import FakeCluster, FakeTransport, status


def gpu_node(name: str, profile: str | None) -> dict[str, Any]:
    labels = {PROFILE_LABEL: profile} if profile else {}
    return {"kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels}, "status": {}}


class Recorder:
    def __init__(self, fail_node: str | None = None) -> None:
        self.writes: list[tuple[str, str, Any]] = []
        self.fail_node = fail_node

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.writes.append((request.method, request.url.path, body))
        if self.fail_node and self.fail_node in request.url.path:
            return status(500, "etcd is unhappy")
        return httpx.Response(200, json={})


def runner(objects: list[dict[str, Any]], recorder: Recorder, tmp_path: Path) -> AgentRunner:
    profiles = tuple(p for name in ("dgx-h100", "t4") for p in resolve_profiles(name))
    options = ServeOptions(simulate=True, profiles=profiles, state_dir=tmp_path)
    client = Client(FakeTransport(FakeCluster(objects, served=("optsched.io/v1alpha1",), write=recorder)))
    return AgentRunner(
        client, Writer(client, field_manager="optsched-agent"), AgentFactory(options), AgentMetrics()
    )


def test_a_pass_creates_node_gpus_owned_by_the_node_and_publishes_status_and_annotation(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    reports = asyncio.run(
        runner([gpu_node("h1", "dgx-h100"), gpu_node("other", None)], rec, tmp_path).pass_once()
    )
    assert [r.node for r in reports] == ["h1"], "a node no profile names is not served"
    created = [b for m, p, b in rec.writes if m == "POST" and p.endswith("/nodegpus")]
    assert created[0]["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "h1",
        "uid": "uid-h1",
    }
    (status_patch,) = [b for m, p, b in rec.writes if p.endswith("/nodegpus/h1/status")]
    assert len(status_patch["status"]["gpus"]) == 8 and status_patch["status"]["heartbeat"]
    (node_patch,) = [b for m, p, b in rec.writes if m == "PATCH" and p.endswith("/nodes/h1")]
    value = json.loads(node_patch["metadata"]["annotations"]["optsched.io/gpu-topology"])
    assert value["nvlinkIslands"] == [[0, 1, 2, 3, 4, 5, 6, 7]]
    (capacity,) = [b for m, p, b in rec.writes if p.endswith("/nodes/h1/status")]
    assert capacity["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_a_second_pass_over_an_unchanged_node_writes_nothing_until_the_heartbeat_is_due(
    tmp_path: Path,
) -> None:
    first = Recorder()
    node = gpu_node("h1", "dgx-h100")
    report = asyncio.run(runner([node], first, tmp_path).pass_once())[0]
    node["metadata"]["annotations"] = {"optsched.io/gpu-topology": report.annotation}
    node["metadata"]["labels"].update(report.labels)
    assert report.resources is not None
    node["status"] = {"capacity": report.resources[0], "allocatable": report.resources[1]}
    published = {
        "kind": "NodeGPUs",
        "metadata": {"name": "h1"},
        # As the server keeps it after a merge patch: null values (clique) removed.
        "status": {**without_nulls(report.status), "heartbeat": "x"},
    }
    second = Recorder()
    again = runner([node, published], second, tmp_path)
    again.heartbeat_s = 3600
    again.beats["h1"] = time.monotonic()
    asyncio.run(again.pass_once())
    assert second.writes == []


def test_one_node_that_cannot_be_written_never_stops_the_others(tmp_path: Path) -> None:
    rec = Recorder(fail_node="h1")
    objects = [gpu_node("h1", "dgx-h100"), gpu_node("t1", "t4")]
    r = runner(objects, rec, tmp_path)
    reports = asyncio.run(r.pass_once())
    assert [x.node for x in reports] == ["t1"]
    assert r.metrics.errors.labels("h1", "publish")._value.get() == 1


def test_an_unhealthy_gpu_and_a_drifted_pod_show_in_the_metrics(tmp_path: Path) -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "uid": "u",
            "annotations": {"optsched.io/gpus": "6,7"},
        },
        "spec": {
            "nodeName": "t1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        },
    }
    r = runner([gpu_node("t1", "t4"), pod], Recorder(), tmp_path)
    (tmp_path / "t1").mkdir(parents=True, exist_ok=True)
    inject_xid(tmp_path / "t1", 1, 94)
    (report,) = asyncio.run(r.pass_once())
    assert report.unhealthy == (1,)
    uuid = report.status["gpus"][1]["uuid"]
    registry = r.metrics.registry
    assert (
        registry.get_sample_value("optsched_agent_gpu_healthy", {"node": "t1", "gpu": "1", "uuid": uuid}) == 0
    )
    assert registry.get_sample_value("optsched_agent_unhealthy_gpus", {"node": "t1"}) == 1
    assert registry.get_sample_value("optsched_agent_drift_pods", {"node": "t1"}) == 1
    assert registry.get_sample_value("optsched_agent_drift_detected_total", {"node": "t1"}) == 1
    events = [e.reason for e in report.events]
    assert sorted(events) == ["GPUDrift", "GPUUnhealthy"]


def test_without_the_crd_the_annotation_is_still_published(tmp_path: Path) -> None:
    rec = Recorder()
    client = Client(FakeTransport(FakeCluster([gpu_node("h1", "dgx-h100")], served=(), write=rec)))
    options = ServeOptions(simulate=True, profiles=tuple(resolve_profiles("dgx-h100")), state_dir=tmp_path)
    r = AgentRunner(client, Writer(client), AgentFactory(options), AgentMetrics())
    (report,) = asyncio.run(r.pass_once())
    assert r.crd_missing
    assert not [p for _, p, _ in rec.writes if "nodegpus" in p]
    assert [p for m, p, _ in rec.writes if m == "PATCH" and p.endswith("/nodes/h1")]
    assert report.status["gpus"]


def dra_runner(objects: list[dict[str, Any]], recorder: Recorder, tmp_path: Path) -> AgentRunner:
    options = ServeOptions(simulate=True, profiles=tuple(resolve_profiles("hgx-h200")), state_dir=tmp_path)
    cluster = FakeCluster(objects, served=("optsched.io/v1alpha1", "resource.k8s.io/v1"), write=recorder)
    client = Client(FakeTransport(cluster))
    writer = Writer(client, field_manager="optsched-agent")
    return AgentRunner(client, writer, AgentFactory(options), AgentMetrics(), simulated=True)


def dra_node(**status: Any) -> dict[str, Any]:
    node = gpu_node("d1", "hgx-h200")
    node["metadata"]["labels"]["optsched.io/simulated-dra"] = "true"
    node["status"] = status
    return node


def test_a_simulated_dra_node_gets_a_resource_slice_and_no_device_plugin_capacity(tmp_path: Path) -> None:
    rec = Recorder()
    stale = {"nvidia.com/gpu": "8", "cpu": "192"}
    asyncio.run(dra_runner([dra_node(capacity=stale, allocatable=stale)], rec, tmp_path).pass_once())
    (created,) = [b for m, p, b in rec.writes if m == "POST" and p.endswith("/resourceslices")]
    assert created["metadata"]["name"] == "d1-gpu.nvidia.com"
    assert created["spec"]["nodeName"] == "d1" and created["spec"]["pool"]["generation"] == 1
    assert [d["name"] for d in created["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
    (capacity,) = [b for m, p, b in rec.writes if p.endswith("/nodes/d1/status")]
    assert capacity["status"]["capacity"]["nvidia.com/gpu"] is None, "the device plugin's resource is removed"
    assert not [k for k, v in capacity["status"]["capacity"].items() if v is not None]


def test_the_slice_is_rewritten_only_when_a_gpu_turns_unhealthy(tmp_path: Path) -> None:
    first = Recorder()
    asyncio.run(dra_runner([dra_node()], first, tmp_path).pass_once())
    (created,) = [b for m, p, b in first.writes if m == "POST" and p.endswith("/resourceslices")]
    stored = {"kind": "ResourceSlice", **created, "metadata": {**created["metadata"], "resourceVersion": "9"}}
    again = Recorder()
    asyncio.run(dra_runner([dra_node(), stored], again, tmp_path).pass_once())
    assert not [w for w in again.writes if "resourceslices" in w[1]]
    inject_xid(tmp_path / "d1", 2, 79, "fell off the bus")
    after = Recorder()
    asyncio.run(dra_runner([dra_node(), stored], after, tmp_path).pass_once())
    (patch,) = [b for m, p, b in after.writes if p.endswith("/resourceslices/d1-gpu.nvidia.com")]
    assert patch["spec"]["pool"]["generation"] == 2 and patch["metadata"]["resourceVersion"] == "9"
    assert [d["name"] for d in patch["spec"]["devices"]] == [f"gpu-{i}" for i in range(8) if i != 2]


def test_a_node_no_longer_labelled_dra_loses_its_slice_and_gets_device_plugin_capacity(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    stored = {
        "kind": "ResourceSlice",
        "metadata": {"name": "d1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "d1", "devices": []},
    }
    asyncio.run(dra_runner([gpu_node("d1", "hgx-h200"), stored], rec, tmp_path).pass_once())
    assert ("DELETE", "/apis/resource.k8s.io/v1/resourceslices/d1-gpu.nvidia.com", None) in rec.writes
    (capacity,) = [b for m, p, b in rec.writes if p.endswith("/nodes/d1/status")]
    assert capacity["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_on_a_dra_node_the_gpus_a_pod_holds_come_from_its_allocated_claim(tmp_path: Path) -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "uid": "u",
            "annotations": {"optsched.io/gpus": "0,1"},
        },
        "spec": {
            "nodeName": "d1",
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "optsched-p"}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    results = [
        {"request": "gpus-0", "driver": "gpu.nvidia.com", "pool": "d1", "device": f"gpu-{m}"} for m in (2, 3)
    ]
    claim = {
        "kind": "ResourceClaim",
        "metadata": {"name": "optsched-p", "namespace": "team"},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        },
    }
    (report,) = asyncio.run(dra_runner([dra_node(), pod, claim], Recorder(), tmp_path).pass_once())
    (held,) = report.status["pods"]
    assert held["containers"][0]["gpuIndices"] == [2, 3]
    assert [(d.planned, d.held) for d in report.drift] == [((0, 1), (2, 3))]
    (event,) = [e for e in report.events if e.reason == "GPUDrift"]
    assert "kube-scheduler allocated its claims GPUs 2,3" in event.message
