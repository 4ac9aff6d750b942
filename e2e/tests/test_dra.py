"""DRA on the real control plane: simulated DRA nodes, their ResourceSlices, and kube-scheduler as the judge.

The small profile's H200 nodes are DRA nodes: no ``nvidia.com/gpu`` capacity,
their GPUs in a ResourceSlice in NVIDIA's DRA driver's format that the simulated
agent publishes. A claim that selects two UUIDs by CEL gets exactly those two
devices from the real kube-scheduler, and a second claim for the same UUIDs
stays unschedulable (the pin fails closed). A plain pod asking ``nvidia.com/gpu``
runs there through the ``gpu.nvidia.com`` DeviceClass's extended resource name,
and the agent reads back which GPU it holds. A GPU that turns unhealthy leaves
the slice under a new pool generation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.agent_helpers import NODE_GPUS_API, AgentProcess, running_agent, slices_of
from e2e.testing import GPU, HOSTNAME_LABEL, E2ECluster, Namespace
from optsched.agent.resource_slices import SIMULATED_DRA_LABEL, slice_name
from optsched.agent.simulated import inject_xid
from optsched.model.names import DRA_GPU_DEVICE_CLASS, DRA_GPU_DRIVER, RESOURCE_API

DRA_NODES = [f"h200-{i:03d}" for i in range(4)]


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    state = tmp_path_factory.mktemp("agent-state")
    with running_agent(cluster, state, ready=slices_of(DRA_NODES), what="a slice per DRA node") as proc:
        yield proc


def _slice(cluster: E2ECluster, node: str) -> dict[str, Any] | None:
    return cluster.get(RESOURCE_API, "ResourceSlice", slice_name(node))


def _device_of(cluster: E2ECluster, node: str) -> dict[str, str]:
    """UUID -> device name in the node's slice."""
    found = _slice(cluster, node) or {}
    return {d["attributes"]["uuid"]["string"]: d["name"] for d in found["spec"]["devices"]}


def _claim(name: str, uuids: list[str]) -> dict[str, Any]:
    listed = ", ".join(f'"{u}"' for u in uuids)
    expression = f'device.attributes["{DRA_GPU_DRIVER}"].uuid in [{listed}]'
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus-0",
                        "exactly": {
                            "deviceClassName": DRA_GPU_DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": len(uuids),
                            "selectors": [{"cel": {"expression": expression}}],
                        },
                    }
                ]
            }
        },
    }


def _pod(name: str, node: str, *, claim: str | None = None, gpus: int = 0) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    spec: dict[str, Any] = {
        "nodeSelector": {HOSTNAME_LABEL: node},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"]}],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
        resources["claims"] = [{"name": "gpus", "request": "gpus-0"}]
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    spec["containers"][0]["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _running(cluster: E2ECluster, ns: Namespace, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pod = cluster.get("v1", "Pod", name, ns.name)
        return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

    return cluster.wait(check, f"pod {ns.name}/{name} Running")


def _allocated(cluster: E2ECluster, ns: Namespace, claim: str) -> list[dict[str, Any]]:
    obj = cluster.get(RESOURCE_API, "ResourceClaim", claim, ns.name) or {}
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def test_dra_nodes_have_a_slice_in_the_drivers_format_and_no_device_plugin_gpus(
    cluster: E2ECluster, agent: AgentProcess
) -> None:
    for name in DRA_NODES:
        node = cluster.get("v1", "Node", name) or {}
        assert node["metadata"]["labels"][SIMULATED_DRA_LABEL] == "true"
        assert GPU not in node["status"]["allocatable"] and GPU not in node["status"]["capacity"]
        found = _slice(cluster, name) or {}
        owner = found["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", name, node["metadata"]["uid"])
        spec = found["spec"]
        assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (DRA_GPU_DRIVER, name, name)
        assert [d["name"] for d in spec["devices"]] == [f"gpu-{m}" for m in range(8)]
        gpus = (cluster.get(NODE_GPUS_API, "NodeGPUs", name) or {})["status"]["gpus"]
        assert sorted(_device_of(cluster, name)) == sorted(g["uuid"] for g in gpus)
        assert spec["devices"][0]["attributes"]["productName"] == {"string": "NVIDIA H200"}
    assert not [
        s for s in cluster.list(RESOURCE_API, "ResourceSlice") if s["spec"]["nodeName"].startswith("h100")
    ]


def test_a_claim_pinned_by_uuid_gets_exactly_those_devices_and_a_second_one_fails_closed(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node = "h200-001"
    device_of = _device_of(cluster, node)
    uuids = sorted(device_of)[2:4]
    ns.apply_one(_claim("pinned", uuids))
    ns.apply_one(_pod("pinned", node, claim="pinned"))
    _running(cluster, ns, "pinned")
    results = _allocated(cluster, ns, "pinned")
    assert sorted(r["device"] for r in results) == sorted(device_of[u] for u in uuids)
    assert {(r["driver"], r["pool"]) for r in results} == {(DRA_GPU_DRIVER, node)}
    claim = cluster.get(RESOURCE_API, "ResourceClaim", "pinned", ns.name) or {}
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["pinned"]

    ns.apply_one(_claim("again", uuids))
    ns.apply_one(_pod("again", node, claim="again"))

    def unschedulable() -> dict[str, Any] | None:
        pod = cluster.get("v1", "Pod", "again", ns.name) or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        scheduled = next((c for c in conditions if c["type"] == "PodScheduled"), None)
        return pod if scheduled and scheduled.get("reason") == "Unschedulable" else None

    cluster.wait(unschedulable, "the second pod for the same UUIDs to be unschedulable")
    time.sleep(5)  # give kube-scheduler more attempts to (wrongly) allocate other devices
    pod = cluster.get("v1", "Pod", "again", ns.name) or {}
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"
    assert _allocated(cluster, ns, "again") == [], "no other devices were substituted"


def test_a_plain_pod_asking_nvidia_gpu_runs_on_a_dra_node_through_the_device_class(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node = "h200-002"
    ns.apply_one(_pod("plain", node, gpus=1))
    pod = _running(cluster, ns, "plain")
    assert pod["spec"]["nodeName"] == node
    extended = pod["status"]["extendedResourceClaimStatus"]
    results = _allocated(cluster, ns, extended["resourceClaimName"])
    assert len(results) == 1 and results[0]["pool"] == node
    uuid = {v: k for k, v in _device_of(cluster, node).items()}[results[0]["device"]]

    def held() -> list[str] | None:
        status = (cluster.get(NODE_GPUS_API, "NodeGPUs", node) or {}).get("status") or {}
        mine = [p for p in status.get("pods") or [] if (p["namespace"], p["name"]) == (ns.name, "plain")]
        return mine[0]["containers"][0]["gpuUUIDs"] if mine else None

    assert cluster.wait(held, "the agent to read back the GPU the pod holds") == [uuid]


def test_a_gpu_that_turns_unhealthy_leaves_the_slice_under_a_new_generation(
    cluster: E2ECluster, agent: AgentProcess
) -> None:
    node = "h200-003"
    before = _slice(cluster, node) or {}
    gpus = (cluster.get(NODE_GPUS_API, "NodeGPUs", node) or {})["status"]["gpus"]
    broken = next(g for g in gpus if g["index"] == 5)
    inject_xid(agent.state_dir / node, 5, 79, "GPU has fallen off the bus")

    def without() -> dict[str, Any] | None:
        now = _slice(cluster, node) or {}
        return now if broken["uuid"] not in _device_of(cluster, node) else None

    after = cluster.wait(without, "the unhealthy GPU to leave the slice")
    assert after["spec"]["pool"]["generation"] > before["spec"]["pool"]["generation"]
    assert len(after["spec"]["devices"]) == 7
    assert f"gpu-{broken['minor']}" not in {d["name"] for d in after["spec"]["devices"]}
