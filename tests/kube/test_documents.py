"""List responses as standalone objects: kind set, bookkeeping dropped, only pods that hold capacity."""

from __future__ import annotations

from typing import Any

from optsched.kube.documents import KINDS, clean_item, items_of, keep_pod


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


def test_dra_kinds_are_listed_quietly_claims_cluster_wide_templates_per_namespace() -> None:
    dra = {k.kind: k for k in KINDS if k.group == "resource.k8s.io"}
    assert set(dra) == {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"}
    assert all(
        k.optional and k.quiet_if_absent and k.api_versions()[0] == "resource.k8s.io/v1" for k in dra.values()
    )
    assert not dra["ResourceClaim"].by_namespace and dra["ResourceClaimTemplate"].by_namespace
