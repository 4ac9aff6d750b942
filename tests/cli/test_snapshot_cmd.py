"""``optsched snapshot`` writes what ``plan --snapshot`` replays; ``plan --kubeconfig`` plans it."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
import yaml

import optsched.kube.reader
from optsched.kube.client import Client
from optsched.kube.reader import Listing, read_cluster
from optsched.model.names import KUEUE_API, NODE_GPUS_API
from optsched.snapshot.documents import read_documents
from tests.cli.conftest import FAST, SMALL
from tests.kube.fake import FakeCluster, FakeTransport
from tests.snapshot import raw


@functools.cache
def _example_objects() -> tuple[dict[str, Any], ...]:
    return tuple(read_documents(SMALL))


@pytest.fixture
def live_cluster(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A stand-in for the API server that returns the objects of the small example."""
    objects = [dict(o) for o in _example_objects()]

    def fetch(kubeconfig: str | None, namespace: str | None = None, **kwargs: Any) -> Listing:
        return Listing(objects, ("AdmissionCheck: not served (404)",))

    monkeypatch.setattr(optsched.kube.reader, "fetch_snapshot_objects", fetch)
    return objects


def test_snapshot_writes_a_list_that_plan_replays(run_cli, live_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "snap.yaml"
    result = run_cli("snapshot", "--out", str(target))
    assert result.code == 0
    assert f"wrote {len(live_cluster)} objects" in result.err
    assert "warning: AdmissionCheck: not served" in result.err
    document = yaml.safe_load(target.read_text())
    assert document["apiVersion"] == "v1" and document["kind"] == "List"
    assert len(document["items"]) == len(live_cluster)

    replayed = json.loads(run_cli("plan", "--snapshot", str(target), "--format", "json", *FAST).out)
    original = json.loads(run_cli("plan", "--snapshot", str(SMALL), "--format", "json", *FAST).out)
    assert replayed["workloads"] == original["workloads"]


def test_plan_from_a_live_cluster(run_cli, live_cluster) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--kubeconfig", "--format", "json", *FAST)
    assert result.code == 0
    assert json.loads(result.out)["workloads"]


def test_snapshot_to_an_unwritable_path_exits_2(run_cli, live_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "missing-dir" / "snap.yaml"
    result = run_cli("snapshot", "--out", str(target))
    assert result.code == 2
    assert str(target) in result.err and "cannot write" in result.err


@pytest.fixture
def agent_cluster(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A fake API server with the NodeGPUs CRD: a running pod really holds GPUs 4-7, not the 0-3 planned."""
    running = raw.pod("a-0", "n1", gpus=4, annotations={"optsched.io/gpus": "0,1,2,3"})
    objects = [
        raw.node("n1"),
        raw.node_gpus("n1", unhealthy=(0,), pods=[raw.holding("n1", "a-0", 4, 5, 6, 7)]),
        raw.cluster_queue(gpus=8),
        *raw.queue_objects(),
        running,
        raw.workload("b", gpus=3),
    ]

    def fetch(kubeconfig: str | None, namespace: str | None = None, **kwargs: Any) -> Listing:
        transport = FakeTransport(FakeCluster(objects, served=(KUEUE_API, NODE_GPUS_API)))
        return asyncio.run(read_cluster(Client(transport), namespace, **kwargs))

    monkeypatch.setattr(optsched.kube.reader, "fetch_snapshot_objects", fetch)
    return objects


def test_node_gpus_are_saved_and_plan_from_the_file_as_live(run_cli, agent_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "snap.yaml"
    assert run_cli("snapshot", "--out", str(target)).code == 0
    saved = [o for o in yaml.safe_load(target.read_text())["items"] if o["kind"] == "NodeGPUs"]
    assert [(o["apiVersion"], o["metadata"]["name"]) for o in saved] == [(NODE_GPUS_API, "n1")]

    replayed = json.loads(run_cli("plan", "--snapshot", str(target), "--format", "json", *FAST).out)
    live = json.loads(run_cli("plan", "--kubeconfig", "--format", "json", *FAST).out)
    assert replayed["workloads"] == live["workloads"]
    [admitted] = [w for w in live["workloads"] if w["decision"] == "admit"]
    assert admitted["podSets"][0]["pods"][0]["gpus"] == [1, 2, 3]
