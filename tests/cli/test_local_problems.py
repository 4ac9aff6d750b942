"""One workload no node can ever hold is deferred with the figures; the rest is planned and the exit is 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli.conftest import BAD, FAST


def _node(name: str, cpu: str) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _workload(name: str, pod_sets: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {
            "podSets": [
                {
                    "name": ps,
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}},
                }
                for ps, req in pod_sets
            ]
        },
    }


def test_a_worker_asking_more_cpu_than_any_node_has_is_deferred_and_the_cli_exits_0(
    run_cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    launcher = ("launcher", {"cpu": "2", "memory": "4Gi"})
    worker = ("worker", {"cpu": "500", "memory": "64Gi", "nvidia.com/gpu": "8"})
    objects = [
        _node("h100-01", "222"),
        _node("h100-02", "110"),
        _workload("mpi-job", [launcher, worker]),
        _workload("train", [("main", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"})]),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = run_cli("plan", "--snapshot", str(path), "--format", "json", *FAST)
    assert result.code == 0, result.err
    decisions = {w["name"]: w for w in json.loads(result.out)["workloads"]}
    assert decisions["ml/train"]["decision"] == "admit"
    mpi = decisions["ml/mpi-job"]
    assert mpi["decision"] == "defer"
    (reason,) = mpi["reasons"]
    assert reason == {
        "code": "PodTooLarge",
        "message": "pod set worker: a pod needs 500 CPUs; the largest node its filters allow (h100-01) "
        "has 222 CPUs, so it can never fit",
        "podSet": "worker",
        "needed": 500,
        "available": 222,
        "unit": "cores",
        "scope": "node",
        "permanent": True,
        "resource": "cpu",
    }


def test_the_too_big_example_is_a_deferral_not_bad_input(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--snapshot", str(BAD / "too-big.yaml"), *FAST)
    assert result.code == 0 and result.err == ""
    assert "ml/job-train-8-3c4d5" in result.out.split("DEFERRED")[0]
    words = " ".join(result.out.split())
    assert "a pod needs 16 GPUs; the largest node its filters allow (h100-01) has 8 GPUs" in words
