"""The GPUs pods hold on a DRA node: the devices kube-scheduler allocated to the claims they use."""

from __future__ import annotations

from typing import Any

from optsched.agent.claim_held import claim_holdings, claims_on
from optsched.agent.devices import Discovery, GpuDevice

DISCOVERY = Discovery(
    gpus=tuple(
        GpuDevice(index=i, minor=7 - i, uuid=f"GPU-{i}", pci_bus_id="", product="NVIDIA-H200", memory_mib=1)
        for i in range(8)
    )
)


def claim(
    name: str, devices: list[tuple[str, str]], *, pool: str = "n1", uid: str = "pod-uid"
) -> dict[str, Any]:
    results = [{"request": r, "driver": "gpu.nvidia.com", "pool": pool, "device": d} for r, d in devices]
    return {
        "metadata": {"name": name, "namespace": "team"},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}],
        },
    }


def pod(containers: list[dict[str, Any]], **parts: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "team", "uid": "pod-uid"},
        "spec": {"containers": containers, "resourceClaims": parts.get("claims", [])},
        "status": parts.get("status", {}),
    }


def held(pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> dict[str, list[str]]:
    out = {}
    for p in claim_holdings("n1", pods, claims, DISCOVERY):
        for c in p.containers:
            out[c.name] = list(c.ids("nvidia.com/gpu"))
    return out


def test_each_container_holds_the_devices_of_the_request_it_names_matched_by_minor() -> None:
    containers = [
        {"name": "a", "resources": {"claims": [{"name": "gpus", "request": "gpus-0"}]}},
        {"name": "b", "resources": {"claims": [{"name": "gpus", "request": "gpus-1"}]}},
        {"name": "sidecar"},
    ]
    p = pod(containers, claims=[{"name": "gpus", "resourceClaimName": "optsched-x"}])
    c = claim("optsched-x", [("gpus-0", "gpu-7"), ("gpus-0", "gpu-6"), ("gpus-1", "gpu-0")])
    assert held([p], [c]) == {"a": ["GPU-0", "GPU-1"], "b": ["GPU-7"]}


def test_a_claim_from_a_template_and_a_whole_claim_without_a_request() -> None:
    containers = [{"name": "a", "resources": {"claims": [{"name": "gpus"}]}}]
    status = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-abcde"}]}
    p = pod(containers, claims=[{"name": "gpus", "resourceClaimTemplateName": "t"}], status=status)
    c = claim("p-gpus-abcde", [("r1", "gpu-5"), ("r2/big", "gpu-4")])
    assert held([p], [c]) == {"a": ["GPU-2", "GPU-3"]}


def test_nvidia_gpu_served_by_the_device_class_is_held_through_the_request_mapping() -> None:
    status = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-xyz",
            "requestMappings": [
                {
                    "containerName": "main",
                    "resourceName": "nvidia.com/gpu",
                    "requestName": "container-0-request-0",
                }
            ],
        }
    }
    p = pod([{"name": "main"}], status=status)
    c = claim("p-extended-resources-xyz", [("container-0-request-0", "gpu-3")])
    assert held([p], [c]) == {"main": ["GPU-4"]}


def test_claims_not_reserved_for_the_pod_or_in_another_pool_hold_nothing() -> None:
    containers = [{"name": "a", "resources": {"claims": [{"name": "gpus"}]}}]
    p = pod(containers, claims=[{"name": "gpus", "resourceClaimName": "c"}])
    assert held([p], [claim("c", [("r", "gpu-0")], uid="other-pod")]) == {}
    elsewhere = claim("c", [("r", "gpu-0")], pool="n2")
    assert held([p], [elsewhere]) == {}
    assert claims_on("n1", [elsewhere]) == [] and claims_on("n2", [elsewhere]) == [elsewhere]
