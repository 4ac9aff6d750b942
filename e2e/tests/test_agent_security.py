"""An agent's token writes only its own node's objects: manifests/agent on the real API server.

The shipped CRD, service account, ClusterRole and ValidatingAdmissionPolicy are applied as
they are. Tokens come from the TokenRequest API, bound to a Node (the form that carries the
``authentication.kubernetes.io/node-name`` extra without a kubelet), to the DaemonSet's own pod
on a KWOK node (the form kubelet mounts), or to nothing. Every write is then made with that
token alone. Two H100 nodes of the small profile play node A and node B; everything a test
changes on them is put back, and every NodeGPUs object is deleted (the CRD stays).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.kube import ApiError, Kube, load_yaml_docs
from e2e.testing import H100, E2ECluster, bearer_client

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "manifests" / "crd" / "nodegpus.yaml"
AGENT = REPO / "manifests" / "agent"
NAMESPACE = "optsched-system"
ACCOUNT = "optsched-agent"
NGPU = "optsched.io/v1alpha1"
TOPOLOGY = "optsched.io/gpu-topology"
POLICY_DENIAL = "ValidatingAdmissionPolicy 'optsched-agent-node-restriction'"
AGENT_PODS = "app.kubernetes.io/component=agent"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass(frozen=True)
class Node:
    name: str
    uid: str


@pytest.fixture(scope="module")
def installed(cluster: E2ECluster) -> Iterator[None]:
    """The CRD, then the agent's account, RBAC and policy, until the policy is enforced."""
    cluster.apply(CRD)
    cluster.wait_condition(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "nodegpus.optsched.io", "Established"
    )
    created_ns = cluster.get("v1", "Namespace", NAMESPACE) is None
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    objects = [
        d
        for f in ("serviceaccount.yaml", "rbac.yaml", "policy.yaml", "resourceslice-policy.yaml")
        for d in load_yaml_docs(AGENT / f)
    ]
    cluster.apply(objects, namespace=NAMESPACE)
    unbound = agent_client(cluster, token(cluster))
    probe = {"apiVersion": NGPU, "kind": "NodeGPUs", "metadata": {"name": "policy-probe"}}

    def enforced() -> bool:
        try:
            unbound.create(probe, dry_run=True)
        except ApiError as exc:
            return exc.status == 403 and "bound to no node" in str(exc)
        return False

    cluster.wait(enforced, "the agent policy to deny an unbound token")
    unbound.close()
    yield
    for obj in reversed(objects):
        cluster.delete({**obj, "metadata": {**obj["metadata"], "namespace": NAMESPACE}})
    if created_ns:
        cluster.kube.delete("v1", "Namespace", NAMESPACE)


@pytest.fixture
def nodes(cluster: E2ECluster, installed: None) -> Iterator[tuple[Node, Node]]:
    """Nodes A and B; afterwards their labels, annotations and capacity as before, no NodeGPUs."""
    a, b = sorted(cluster.gpu_nodes(H100), key=lambda n: n["metadata"]["name"])[:2]
    before = {n["metadata"]["name"]: copy.deepcopy(n) for n in (a, b)}
    yield Node(a["metadata"]["name"], a["metadata"]["uid"]), Node(b["metadata"]["name"], b["metadata"]["uid"])
    for name, old in before.items():
        cluster.kube.delete(NGPU, "NodeGPUs", name)
        now = cluster.get("v1", "Node", name) or {}
        meta = {key: _restore(old["metadata"], now["metadata"], key) for key in ("labels", "annotations")}
        cluster.kube.patch("v1", "Node", name, {"metadata": meta})
        status = {key: _restore(old["status"], now["status"], key) for key in ("capacity", "allocatable")}
        cluster.kube.patch("v1", "Node", name, {"status": status}, subresource="status")


def _restore(old: dict[str, Any], now: dict[str, Any], key: str) -> dict[str, Any]:
    """A merge patch of ``key`` that puts back the old map (null removes what was added)."""
    was, has = old.get(key) or {}, now.get(key) or {}
    return {**{k: None for k in has if k not in was}, **was}


def token(cluster: E2ECluster, bound_to: dict[str, Any] | None = None) -> str:
    """A token of the agent's service account from the TokenRequest API, bound to an object or none."""
    spec: dict[str, Any] = {"expirationSeconds": 600}
    if bound_to:
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": bound_to["kind"],
            "name": bound_to["metadata"]["name"],
            "uid": bound_to["metadata"]["uid"],
        }
    path = cluster.kube.path("v1", "ServiceAccount", ACCOUNT, NAMESPACE, "token")
    review = cluster.kube.request(
        "POST", path, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    )
    return str(review["status"]["token"])


def node_token(cluster: E2ECluster, node: Node) -> str:
    return token(cluster, {"kind": "Node", "metadata": {"name": node.name, "uid": node.uid}})


def agent_client(cluster: E2ECluster, bearer: str) -> Kube:
    """A client that authenticates with ``bearer`` only (the cluster's CA, no client certificate)."""
    return bearer_client(cluster, bearer, ACCOUNT)


def node_gpus(node: Node) -> dict[str, Any]:
    return {
        "apiVersion": NGPU,
        "kind": "NodeGPUs",
        "metadata": {
            "name": node.name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}],
        },
        "spec": {
            "migLayout": [
                {
                    "gpu": 0,
                    "instances": [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}],
                }
            ]
        },
    }


def gpus_status(node: Node) -> dict[str, Any]:
    """The status of the NodeGPUs contract's example, for ``node``."""
    gpu = {
        "index": 0,
        "minor": 0,
        "uuid": "GPU-8f6e4c1a-0000",
        "pciBusId": "00000000:18:00.0",
        "numa": 0,
        "island": 0,
        "product": H100,
        "memoryMiB": 81559,
        "clique": None,
        "health": {"state": "Healthy", "reason": ""},
        "mig": {
            "capable": True,
            "enabled": False,
            "instances": [{"profile": "1g.10gb", "start": 0, "size": 1, "uuid": "MIG-0000", "inUse": False}],
        },
    }
    sick = {
        "index": 1,
        "uuid": "GPU-8f6e4c1a-0001",
        "island": 0,
        "numa": None,
        "health": {"state": "Unhealthy", "reason": "XID 79 (GPU has fallen off the bus)"},
    }
    return {
        "apiVersion": NGPU,
        "kind": "NodeGPUs",
        "metadata": {"name": node.name},
        "status": {
            "backend": "nvml",
            "driverVersion": "580.65.06",
            "nvlinkIslands": [[0, 1, 2, 3, 4, 5, 6, 7]],
            "gpus": [gpu, sick],
            "pods": [
                {
                    "namespace": "team-a",
                    "name": "train-0",
                    "containers": [
                        {"name": "main", "gpuUUIDs": ["GPU-8f6e4c1a-0000"], "gpuIndices": [0], "migUUIDs": []}
                    ],
                }
            ],
            "migLayout": {"state": "Success", "message": "", "observedGeneration": 1},
            "heartbeat": "2026-12-01T13:00:00Z",
        },
    }


def denied(call: Any, *words: str) -> str:
    """Run ``call``; it must be refused by the agent policy with a message holding ``words``."""
    with pytest.raises(ApiError) as info:
        call()
    message = str(info.value)
    assert info.value.status == 403 and POLICY_DENIAL in message, message
    assert all(w in message for w in words), message
    return message


def annotate(client: Kube, node: Node, key: str, value: str | None) -> dict[str, Any]:
    return client.patch("v1", "Node", node.name, {"metadata": {"annotations": {key: value}}})


def test_a_node_bound_token_writes_its_own_nodegpus(cluster: E2ECluster, nodes: tuple[Node, Node]) -> None:
    a, _ = nodes
    with agent_client(cluster, node_token(cluster, a)) as agent:
        created = agent.create(node_gpus(a))
        assert created["spec"]["migLayout"][0]["instances"][1] == {"profile": "3g.40gb", "start": 4}
        [applied] = agent.apply(gpus_status(a), subresource="status", field_manager="optsched-agent")
        assert applied["status"]["gpus"][1]["health"]["reason"] == "XID 79 (GPU has fallen off the bus)"
        patched = agent.patch(
            NGPU, "NodeGPUs", a.name, {"status": {"heartbeat": "2026-12-01T13:00:30Z"}}, subresource="status"
        )
        assert patched["status"]["heartbeat"] == "2026-12-01T13:00:30Z"
        record = {"metadata": {"annotations": {"optsched.io/mig-changes": "[]"}}}
        denied(lambda: agent.patch(NGPU, "NodeGPUs", a.name, record), "may write only the status")
        denied(lambda: agent.patch(NGPU, "NodeGPUs", a.name, {"spec": {"migLayout": []}}), "only the status")
    stored = cluster.get(NGPU, "NodeGPUs", a.name)
    assert stored and stored["status"]["pods"][0]["containers"][0]["gpuIndices"] == [0]


def test_a_node_bound_token_cannot_write_another_nodes_nodegpus(
    cluster: E2ECluster, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    with agent_client(cluster, node_token(cluster, a)) as agent:
        denied(lambda: agent.create(node_gpus(b)), f"on node {a.name}", f"nodegpus {b.name}")
        cluster.apply(node_gpus(b))
        denied(
            lambda: agent.patch(NGPU, "NodeGPUs", b.name, {"spec": {"migLayout": []}}),
            f"on node {a.name}",
            f"nodegpus {b.name}",
        )
        denied(lambda: agent.apply(gpus_status(b), subresource="status"), f"nodegpus/status {b.name}")
    stored = cluster.get(NGPU, "NodeGPUs", b.name)
    assert stored and len(stored["spec"]["migLayout"][0]["instances"]) == 2 and "status" not in stored


def test_a_node_bound_token_annotates_only_its_own_node(
    cluster: E2ECluster, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    value = json.dumps(
        {
            "nvlinkIslands": [[0, 1, 2, 3, 4, 5, 6, 7]],
            "numa": [0] * 4 + [1] * 4,
            "unhealthy": [],
            "uuids": [f"GPU-{i}" for i in range(8)],
        }
    )
    b_before = (cluster.get("v1", "Node", b.name) or {})["metadata"]["annotations"].get(TOPOLOGY)
    with agent_client(cluster, node_token(cluster, a)) as agent:
        assert annotate(agent, a, TOPOLOGY, value)["metadata"]["annotations"][TOPOLOGY] == value
        denied(lambda: annotate(agent, b, TOPOLOGY, value), f"on node {a.name}", f"nodes {b.name}")
        labelled = agent.patch("v1", "Node", a.name, {"metadata": {"labels": {"nvidia.com/gpu.count": "7"}}})
        assert labelled["metadata"]["labels"]["nvidia.com/gpu.count"] == "7"
        # Its own node, but not what an agent publishes: other annotations and labels, the spec.
        denied(lambda: annotate(agent, a, "example.com/owner", "agent"), "example.com/owner")
        denied(
            lambda: agent.patch(
                "v1", "Node", a.name, {"metadata": {"labels": {"kubernetes.io/hostname": "x"}}}
            ),
            "kubernetes.io/hostname",
        )
        denied(lambda: agent.patch("v1", "Node", a.name, {"spec": {"unschedulable": True}}), "spec")
    assert (cluster.get("v1", "Node", b.name) or {})["metadata"]["annotations"].get(TOPOLOGY) == b_before


def test_a_node_bound_token_changes_only_gpu_capacity_of_its_own_node(
    cluster: E2ECluster, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    mig = {
        "status": {
            "capacity": {"nvidia.com/mig-3g.40gb": "2"},
            "allocatable": {"nvidia.com/mig-3g.40gb": "2"},
        }
    }
    with agent_client(cluster, node_token(cluster, a)) as agent:
        done = agent.patch("v1", "Node", a.name, mig, subresource="status")
        assert done["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "2"
        denied(lambda: agent.patch("v1", "Node", b.name, mig, subresource="status"), f"nodes/status {b.name}")
        denied(
            lambda: agent.patch(
                "v1", "Node", a.name, {"status": {"capacity": {"cpu": "1000"}}}, subresource="status"
            ),
            "it changed cpu",
        )
        addresses = {"status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}}
        denied(
            lambda: agent.patch("v1", "Node", a.name, addresses, subresource="status"),
            "capacity and allocatable",
        )


def _slice(node: Node, driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node.name}-gpu.nvidia.com"},
        "spec": {
            "driver": driver,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }


def test_a_node_bound_token_writes_only_the_gpu_resource_slice_of_its_own_node(
    cluster: E2ECluster, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    with agent_client(cluster, token(cluster)) as unbound:

        def enforced() -> bool:
            try:
                unbound.create(_slice(a), dry_run=True)
            except ApiError as exc:
                return exc.status == 403 and "bound to no node" in str(exc)
            return False

        cluster.wait(enforced, "the ResourceSlice policy to deny an unbound token")
    with agent_client(cluster, node_token(cluster, a)) as agent:
        created = agent.create(_slice(a), dry_run=True)
        assert created["spec"]["nodeName"] == a.name
        for other, words in (
            (_slice(b), f"{b.name}-gpu.nvidia.com"),
            (_slice(a, "example.com"), "gpu.nvidia.com"),
        ):
            with pytest.raises(ApiError) as info:
                agent.create(other, dry_run=True)
            message = str(info.value)
            assert info.value.status == 403 and "optsched-agent-resourceslice-restriction" in message, message
            assert f"on node {a.name}" in message and words in message, message


def test_a_token_bound_to_no_node_writes_nothing(cluster: E2ECluster, nodes: tuple[Node, Node]) -> None:
    a, _ = nodes
    with agent_client(cluster, token(cluster)) as agent:
        denied(lambda: agent.create(node_gpus(a)), "bound to no node", f"nodegpus {a.name}")
        denied(lambda: annotate(agent, a, TOPOLOGY, "{}"), "bound to no node", f"nodes {a.name}")
    assert cluster.get(NGPU, "NodeGPUs", a.name) is None


def test_the_daemonsets_pod_token_is_held_to_the_pods_node(
    cluster: E2ECluster, nodes: tuple[Node, Node]
) -> None:
    """The DaemonSet schedules onto every GPU node; a token bound to its pod on A writes A, not B."""
    a, b = nodes
    runtime = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
    }
    own_runtime = cluster.get("node.k8s.io/v1", "RuntimeClass", "nvidia") is None
    [daemonset] = load_yaml_docs(AGENT / "daemonset.yaml")
    daemonset["metadata"]["namespace"] = NAMESPACE
    if own_runtime:
        cluster.apply(runtime)
    try:
        cluster.apply(daemonset)
        gpu_nodes = {
            n["metadata"]["name"]
            for n in cluster.list("v1", "Node", label_selector="nvidia.com/gpu.present=true")
        }

        def placed() -> dict[str, dict[str, Any]] | None:
            pods = cluster.kube.list("v1", "Pod", NAMESPACE, label_selector=AGENT_PODS)
            on = {p["spec"].get("nodeName"): p for p in pods if p.get("status", {}).get("phase") == "Running"}
            return on if set(on) == gpu_nodes else None

        pods = cluster.wait(placed, f"one running agent pod on each of {len(gpu_nodes)} GPU nodes")
        with agent_client(cluster, token(cluster, {**pods[a.name], "kind": "Pod"})) as agent:
            agent.create(node_gpus(a))
            denied(lambda: agent.create(node_gpus(b)), f"on node {a.name}", f"nodegpus {b.name}")
    finally:
        cluster.delete(daemonset)
        if own_runtime:
            cluster.delete(runtime)
    cluster.wait(
        lambda: not cluster.kube.list("v1", "Pod", NAMESPACE, label_selector=AGENT_PODS),
        "the agent pods to go",
    )
