"""GKE GPU nodes carry ``nvidia.com/gpu=present:NoSchedule``; admission, not the template, tolerates it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli.conftest import FAST

GKE_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _gke_node(name: str, gpus: int) -> dict[str, Any]:
    """A node as GKE lists it: accelerator labels, the GPU taint, no GFD labels."""
    labels = {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-nodepool": "gpu-pool",
        "cloud.google.com/machine-family": "g2",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": f"g2-standard-{24 * gpus // 2}",
    }
    allocatable = {"cpu": "23", "memory": "88Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [GKE_TAINT]},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _workload(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "resources": {"limits": resources}}]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"queueName": "", "podSets": [{"name": "main", "count": 1, "template": template}]},
    }


def _snapshot(tmp_path: Path) -> Path:
    objects = [
        _gke_node("gke-gpu-pool-1", 2),
        _workload("train", {"nvidia.com/gpu": 2, "cpu": "8", "memory": "32Gi"}),
        _workload("etl", {"cpu": "4", "memory": "8Gi"}),
    ]
    path = tmp_path / "gke.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _decisions(out: str) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in json.loads(out)["workloads"]}


def test_gpu_workloads_are_planned_on_tainted_gke_nodes_by_default(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(_snapshot(tmp_path)), "--format", "json", *FAST)
    assert result.code == 0
    decisions = _decisions(result.out)
    train = decisions["ml/train"]
    assert train["decision"] == "admit"
    assert train["podSets"][0]["pods"][0]["node"] == "gke-gpu-pool-1"
    assert train["eligibility"][0]["admissionTolerated"] == {"nvidia.com/gpu": 1}
    # A pod that requests no GPU gets no toleration: the GPU node stays out of its reach, as on GKE.
    etl = decisions["ml/etl"]
    assert etl["decision"] == "defer"
    assert etl["reasons"][0]["message"] == (
        "pod set main: no node matches: 1 fail taint nvidia.com/gpu=present:NoSchedule"
    )


def test_without_the_emulation_gpu_workloads_wait_for_the_taint(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    snap = str(_snapshot(tmp_path))
    result = run_cli(
        "plan", "--snapshot", snap, "--format", "json", "--no-extended-resource-toleration", *FAST
    )
    assert result.code == 0
    train = _decisions(result.out)["ml/train"]
    assert train["decision"] == "defer"
    assert train["reasons"][0]["code"] == "NoMatchingNode"
    assert "taint nvidia.com/gpu=present:NoSchedule" in train["reasons"][0]["message"]


def test_explain_says_which_taints_the_admission_toleration_lets_through(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(_snapshot(tmp_path)), "--explain", *FAST)
    assert result.code == 0
    assert (
        "  tolerates nvidia.com/gpu taints on 1 node (ExtendedResourceToleration: the pods request "
        "nvidia.com/gpu)" in result.out
    )
    off = run_cli(
        "plan", "--snapshot", str(_snapshot(tmp_path)), "--explain", "--no-extended-resource-toleration"
    )
    assert off.code == 0 and "ExtendedResourceToleration" not in off.out
