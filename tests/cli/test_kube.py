"""The live-cluster reader without a cluster: list conversion, version fallback, namespaces."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from optsched.kube.documents import KINDS, clean_item, items_of, keep_pod
from optsched.kube.reader import read_cluster


def _pod(
    name: str, *, node: str | None = None, phase: str = "Running", gated: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": "optsched.io/placement"}]
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": {"phase": phase}}


def test_only_pods_that_hold_capacity_are_kept() -> None:
    assert keep_pod(_pod("bound", node="n1"))
    assert keep_pod(_pod("gated", phase="Pending", gated=True))
    assert not keep_pod(_pod("done", node="n1", phase="Succeeded"))
    assert not keep_pod(_pod("failed", node="n1", phase="Failed"))
    assert not keep_pod(_pod("unbound", phase="Pending"))


def test_clean_item_sets_kind_and_drops_server_bookkeeping() -> None:
    item = {
        "metadata": {
            "name": "n1",
            "managedFields": [{"manager": "kubelet"}],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "optsched.io/gpu-topology": "{}",
            },
        },
        "status": {"allocatable": {"cpu": "8"}},
    }
    out = clean_item(item, kind="Node", api_version="v1")
    assert list(out)[:2] == ["apiVersion", "kind"]
    assert out["kind"] == "Node" and out["apiVersion"] == "v1"
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"optsched.io/gpu-topology": "{}"}
    assert out["status"] == item["status"]


def test_items_of_a_list_response() -> None:
    pods_kind = next(k for k in KINDS if k.kind == "Pod")
    body = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [_pod("a", node="n1"), _pod("b", phase="Pending")],
    }
    items = items_of(pods_kind, body, "v1")
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [("Pod", "a")]


class _Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def json(self) -> dict[str, Any]:
        return self._body


class _NotFound(Exception):
    def __init__(self) -> None:
        super().__init__("404 page not found")
        self.response = httpx.Response(404)


class FakeApi:
    """Serves core v1 and Kueue v1beta1 only, recording every request it sees."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None, str]] = []

    @contextlib.asynccontextmanager
    async def call_api(
        self,
        method: str = "GET",
        version: str = "v1",
        base: str = "",
        namespace: str | None = None,
        url: str = "",
    ) -> AsyncIterator[_Response]:
        self.calls.append((method, version, namespace, url))
        if version not in ("v1", "kueue.x-k8s.io/v1beta1"):
            raise _NotFound()
        items: list[dict[str, Any]] = []
        if url == "nodes":
            items = [{"metadata": {"name": "n1"}}]
        elif url == "pods":
            items = [_pod(f"p-{namespace}", node="n1")]
        elif url == "workloads":
            items = [
                {"apiVersion": version, "kind": "Workload", "metadata": {"name": "w", "namespace": namespace}}
            ]
        yield _Response({"apiVersion": version, "items": items})


def test_read_cluster_falls_back_to_v1beta1_and_reads_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import kr8s.asyncio

    fake = FakeApi()

    async def fake_api(**kwargs: Any) -> FakeApi:
        return fake

    monkeypatch.setattr(kr8s.asyncio, "api", fake_api)
    notes: list[str] = []
    objects = asyncio.run(read_cluster(None, namespaces=["ml", "infra"], notes=notes))
    assert {c[0] for c in fake.calls} == {"GET"}
    kinds = [o["kind"] for o in objects]
    assert kinds == ["Node", "Pod", "Workload", "Workload"]
    assert {o["apiVersion"] for o in objects if o["kind"] == "Workload"} == {"kueue.x-k8s.io/v1beta1"}
    # Nodes and Pods are listed cluster-wide (a pod in any namespace holds GPUs); the queue per namespace.
    assert ("GET", "v1", None, "nodes") in fake.calls
    assert [c[2] for c in fake.calls if c[3] == "pods"] == [None]
    assert {c[2] for c in fake.calls if c[3] == "workloads"} == {"ml", "infra"}
    # Topology is tried at every known version; v1beta1 answers, so nothing is reported missing.
    assert notes == []
