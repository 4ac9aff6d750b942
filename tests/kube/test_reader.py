"""The live-cluster reader through the one client: version fallback, namespaces, notes, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from optsched.errors import InputError
from optsched.kube import reader
from optsched.kube.client import Client
from optsched.kube.reader import fetch_snapshot_objects, read_cluster
from optsched.model.names import KUEUE_API, NODE_GPUS_API
from tests.kube.fake import FakeCluster, FakeTransport, status
from tests.kube.fake_server import FakeServer

V1BETA1 = "kueue.x-k8s.io/v1beta1"
OBJECTS = [
    {"kind": "Node", "metadata": {"name": "n1"}},
    {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    },
    {"kind": "Workload", "metadata": {"name": "w", "namespace": "ml"}},
    {"kind": "Workload", "metadata": {"name": "w", "namespace": "infra"}},
    {"kind": "Workload", "metadata": {"name": "w", "namespace": "elsewhere"}},
]


def test_read_cluster_falls_back_to_v1beta1_and_reads_only() -> None:
    transport = FakeTransport(FakeCluster(OBJECTS, served=(V1BETA1,)))
    objects, notes = asyncio.run(read_cluster(Client(transport), namespaces=["ml", "infra"]))
    paths = [r.url.path for r in transport.requests]
    assert {r.method for r in transport.requests} == {"GET"}
    kinds = [o["kind"] for o in objects]
    assert kinds == ["Node", "Pod", "Workload", "Workload"]
    assert {o["apiVersion"] for o in objects if o["kind"] == "Workload"} == {V1BETA1}
    # Nodes and Pods are listed cluster-wide (a pod in any namespace holds GPUs); the queue per namespace.
    assert "/api/v1/nodes" in paths
    assert [p for p in paths if p.endswith("/pods")] == ["/api/v1/pods"]
    assert {p for p in paths if p.endswith("/workloads") and V1BETA1 in p} == {
        f"/apis/{V1BETA1}/namespaces/ml/workloads",
        f"/apis/{V1BETA1}/namespaces/infra/workloads",
    }
    # Topology is tried at every known version; v1beta1 answers, so nothing is reported missing.
    assert notes == ()


def test_a_cluster_without_kueue_yields_nodes_and_pods_and_a_note_per_missing_kind() -> None:
    transport = FakeTransport(FakeCluster(OBJECTS, served=()))
    objects, notes = asyncio.run(read_cluster(Client(transport)))
    assert [o["kind"] for o in objects] == ["Node", "Pod"]
    missing = [n.split(":")[0] for n in notes]
    assert missing == [
        "ResourceFlavor",
        "Topology",
        "AdmissionCheck",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
    ]
    assert all("not served" in n for n in notes)


def test_a_refused_list_is_an_input_error_naming_the_kubeconfig_and_the_kind() -> None:
    transport = FakeTransport(lambda request: status(403, 'nodes is forbidden: User "u" cannot list'))
    with pytest.raises(InputError) as caught:
        asyncio.run(read_cluster(Client(transport, source="kc.yaml")))
    message = str(caught.value)
    assert message.startswith("kc.yaml: Node:")
    assert "API server refused to list nodes" in message and "forbidden" in message


def test_an_unreachable_server_is_an_input_error_naming_the_kubeconfig() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(InputError) as caught:
        asyncio.run(read_cluster(Client(FakeTransport(refuse), source="kc.yaml")))
    assert str(caught.value) == "kc.yaml: Node: cannot reach the API server: connection refused"


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    with pytest.raises(InputError, match=f"{absent}: no such file"):
        fetch_snapshot_objects(str(absent))


def test_namespaces_are_read_whole_for_namespace_selectors() -> None:
    team = {"kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "a"}}}
    transport = FakeTransport(FakeCluster([*OBJECTS, team]))
    objects, notes = asyncio.run(read_cluster(Client(transport), namespaces=["infra"]))
    assert [o for o in objects if o["kind"] == "Namespace"] == [{"apiVersion": "v1", **team}]
    assert "/api/v1/namespaces" in [r.url.path for r in transport.requests]
    assert notes == ()


def test_a_refused_namespace_list_is_a_note_not_an_error() -> None:
    cluster = FakeCluster(OBJECTS)

    def refuse_namespaces(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/namespaces":
            return status(403, 'namespaces is forbidden: User "u" cannot list')
        return cluster(request)

    objects, notes = asyncio.run(read_cluster(Client(FakeTransport(refuse_namespaces))))
    assert [o["kind"] for o in objects].count("Workload") == 3
    [note] = notes
    assert note.startswith("Namespace: not readable (namespaces is forbidden") and note.endswith(
        "not checked"
    )


NODE_GPUS = {"kind": "NodeGPUs", "metadata": {"name": "n1"}, "status": {"gpus": []}}


def test_node_gpus_are_listed_where_the_crd_is_served() -> None:
    transport = FakeTransport(FakeCluster([*OBJECTS, NODE_GPUS], served=(KUEUE_API, NODE_GPUS_API)))
    objects, notes = asyncio.run(read_cluster(Client(transport)))
    assert [o for o in objects if o["kind"] == "NodeGPUs"] == [{"apiVersion": NODE_GPUS_API, **NODE_GPUS}]
    assert f"/apis/{NODE_GPUS_API}/nodegpus" in [r.url.path for r in transport.requests]
    assert notes == ()


def test_a_cluster_without_the_node_gpus_crd_is_normal_and_gets_no_note() -> None:
    transport = FakeTransport(FakeCluster([*OBJECTS, NODE_GPUS], served=(KUEUE_API,)))
    objects, notes = asyncio.run(read_cluster(Client(transport)))
    assert "NodeGPUs" not in [o["kind"] for o in objects]
    assert f"/apis/{NODE_GPUS_API}/nodegpus" in [r.url.path for r in transport.requests]
    assert notes == ()


def test_a_refused_node_gpus_list_is_one_note() -> None:
    cluster = FakeCluster([*OBJECTS, NODE_GPUS], served=(KUEUE_API, NODE_GPUS_API))

    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/nodegpus"):
            return status(403, 'nodegpus.optsched.io is forbidden: User "u" cannot list')
        return cluster(request)

    objects, notes = asyncio.run(read_cluster(Client(FakeTransport(refuse))))
    assert "NodeGPUs" not in [o["kind"] for o in objects] and "Node" in [o["kind"] for o in objects]
    [note] = notes
    assert note.startswith("NodeGPUs: not readable (nodegpus.optsched.io is forbidden")


def test_read_cluster_lists_in_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [{"kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(5)]
    server = FakeServer(nodes)
    monkeypatch.setattr(reader, "PAGE_SIZE", 2)
    objects, _ = asyncio.run(read_cluster(Client(server)))
    assert sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Node") == [
        f"n{i}" for i in range(5)
    ]
    pages = [r.url.params.get("continue") for r in server.requests if r.url.path == "/api/v1/nodes"]
    assert pages == [None, "2", "4"]
