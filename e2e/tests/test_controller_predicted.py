"""Device-plugin nodes on the real control plane: the GPUs optsched predicts are the GPUs pods get.

A simulated agent serves every fake GPU node and, on device-plugin nodes,
plays kubelet and NVIDIA's device plugin: each new pod gets the plugin's
best-effort choice among the free GPUs, in the order pods were bound. The
controller pins one predicted pod per node at a time, in plan order, so the
plugin sees the free set the plan assumed. Two scenarios:

* a mixed queue (1, 2, 4 and 8 GPUs, a gang) on the A100 (bridged pairs),
  H100 (NVSwitch) and T4 (PCIe) nodes: every pod's devices, as the agent
  reads them back, are its planned GPUs (``optsched.io/gpus``), and the
  controller's ``optsched_predicted_pods`` says so;
* a forced disagreement: a pod placed around optsched on the node of a pinned
  but unbound workload takes that workload's predicted NVLink island; the
  agent reports the drift, the workload is planned again onto free GPUs and,
  once bound, holds its new plan.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from e2e.agent_helpers import NODE_GPUS_API, AgentProcess, running_agent
from e2e.optsched_helpers import check_state, free_port, optsched_queue, pod_gpus, record_of
from e2e.testing import GPU, GPU_PRODUCT, H100, HOSTNAME_LABEL, KUEUE_API, E2ECluster, Namespace, gpu_job
from e2e.tests.test_controller import controller, gang

A100 = "NVIDIA-A100-PCIE-40GB"
T4 = "Tesla-T4"
HOLD = "e2e.optsched.io/hold"


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    with running_agent(cluster, tmp_path_factory.mktemp("agent-state")) as proc:
        yield proc


def read_back(cluster: E2ECluster) -> dict[tuple[str, str], tuple[str, list[int]]]:
    """(namespace, pod) -> (node, GPU indices) for every pod the agents list in ``NodeGPUs``."""
    out = {}
    for obj in cluster.list(NODE_GPUS_API, "NodeGPUs"):
        for pod in (obj.get("status") or {}).get("pods") or []:
            indices = sorted(i for c in pod["containers"] for i in c.get("gpuIndices") or [])
            out[pod["namespace"], pod["name"]] = (obj["metadata"]["name"], indices)
    return out


def events(cluster: E2ECluster, namespace: str, reason: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.list("v1", "Event", namespace)
        if e.get("reason") == reason and (name is None or e["involvedObject"].get("name") == name)
    ]


def predicted_pods(port: int) -> dict[str, float] | None:
    """``optsched_predicted_pods`` by state, scraped from the controller's plain metrics endpoint."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.TransportError:
        return None
    found = re.findall(r'^optsched_predicted_pods\{state="(\w+)"\} ([0-9.e+]+)$', text, re.MULTILINE)
    return {state: float(value) for state, value in found} or None


def test_every_pod_of_a_mixed_queue_gets_the_gpus_the_plan_predicted(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    # Pods of earlier tests still leaving would free GPUs between the plan and the pins: the
    # prediction assumes the free GPUs the plan saw (docs: where it is weaker than DRA).
    cluster.wait(lambda: True if not read_back(cluster) else None, "every GPU node idle", timeout=120)
    port = free_port()
    plain = ("--metrics-bind-address", f"127.0.0.1:{port}", "--metrics-secure", "false")
    with controller(cluster, ns, *plain) as (_proc, check):
        optsched_queue(ns, check)
        specs = [
            (gpu_job("a100-ones", "lq", pods=3, gpus_per_pod=1, node_selector={GPU_PRODUCT: A100}), 3),
            (gpu_job("a100-twos", "lq", pods=2, gpus_per_pod=2, node_selector={GPU_PRODUCT: A100}), 2),
            (gpu_job("a100-four", "lq", pods=1, gpus_per_pod=4, node_selector={GPU_PRODUCT: A100}), 1),
            (gpu_job("h100-twos", "lq", pods=2, gpus_per_pod=2, node_selector={GPU_PRODUCT: H100}), 2),
            (gpu_job("h100-one", "lq", pods=1, gpus_per_pod=1, node_selector={GPU_PRODUCT: H100}), 1),
            (gpu_job("h100-eight", "lq", pods=1, gpus_per_pod=8, node_selector={GPU_PRODUCT: H100}), 1),
            (gang("h100-gang", 2, 8, node_selector={GPU_PRODUCT: H100}), 2),
            (gpu_job("t4-ones", "lq", pods=2, gpus_per_pod=1, node_selector={GPU_PRODUCT: T4}), 2),
            (gpu_job("t4-two", "lq", pods=1, gpus_per_pod=2, node_selector={GPU_PRODUCT: T4}), 1),
            (gpu_job("t4-four", "lq", pods=1, gpus_per_pod=4, node_selector={GPU_PRODUCT: T4}), 1),
        ]
        started = time.monotonic()
        jobs = [(ns.apply_one(job), n) for job, n in specs]
        pods: list[dict[str, Any]] = []
        slots: dict[str, dict[str, Any]] = {}
        for job, n in jobs:
            pods += cluster.wait_pods(job, n, phase="Running", timeout=180)
            record = record_of(cluster.wait_workload(job))
            assert record is not None, job["metadata"]["name"]
            for pod_set, placed in record["podSets"].items():
                for slot in placed:
                    slots[f"{job['metadata']['name']}/{pod_set}/{slot['index']}"] = slot
        bound = time.monotonic() - started
        assert {s.get("enforcement") for s in slots.values()} == {"predicted"}, slots
        keys = {(ns.name, p["metadata"]["name"]) for p in pods}
        held = cluster.wait(
            lambda: (lambda seen: seen if keys <= set(seen) else None)(read_back(cluster)),
            "every pod's devices read back by the agent",
            timeout=60,
        )
        disagreed = []
        for pod in pods:
            node, devices = held[ns.name, pod["metadata"]["name"]]
            planned = sorted(pod_gpus(pod))
            if (node, devices) != (pod["spec"]["nodeName"], planned):
                disagreed.append(f"{pod['metadata']['name']} planned {planned}, holds {devices} on {node}")
        agreed = len(pods) - len(disagreed)
        print(
            f"device-plugin prediction: {agreed}/{len(pods)} pods got the planned GPUs ({bound:.0f}s to bind)"
        )
        assert not disagreed, disagreed
        counted = cluster.wait(
            lambda: (lambda c: c if c and c.get("agreed") == len(pods) else None)(predicted_pods(port)),
            "optsched_predicted_pods{state=agreed} counting every pod",
            timeout=60,
        )
        assert counted.get("drifted", 0) == 0, counted


def _held_by(cluster: E2ECluster, namespace: str, name: str) -> tuple[str, list[int]] | None:
    return read_back(cluster).get((namespace, name))


def _pinned_and_held(cluster: E2ECluster, job: dict[str, Any], plan_id: str) -> dict[str, Any] | None:
    """The job's pod pinned by plan ``plan_id`` with only the test's own gate left, else None."""
    for pod in cluster.pods_of(job):
        gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        labels = pod["metadata"].get("labels") or {}
        if (
            gates == [HOLD]
            and labels.get("optsched.io/plan-id") == plan_id
            and (pod["spec"].get("nodeSelector") or {}).get(HOSTNAME_LABEL)
            and not pod["metadata"].get("deletionTimestamp")
        ):
            return pod
    return None


def rogue_pod(node: str, gpus: int, forged: list[int]) -> dict[str, Any]:
    """A pod placed around optsched (``spec.nodeName``, no queue) claiming GPUs it was never given."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rogue", "annotations": {"optsched.io/gpus": ",".join(map(str, forged))}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"limits": {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def test_a_pod_that_takes_a_predicted_island_is_drift_and_the_workload_is_replanned(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node = "a100-001"
    # Pods of earlier tests still leaving the node would free GPUs between the plan and the bind.
    cluster.wait(
        lambda: True if all(n != node for n, _ in read_back(cluster).values()) else None,
        f"{node} idle",
        timeout=120,
    )
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check, node_labels={HOSTNAME_LABEL: node})
        job = gpu_job("w", "lq", pods=1, gpus_per_pod=2)
        job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": HOLD}]
        job = ns.apply_one(job)
        name = cluster.wait_workload(job)["metadata"]["name"]

        def workload() -> dict[str, Any]:
            return cluster.get(KUEUE_API, "Workload", name, ns.name) or {}

        first = cluster.wait(lambda: record_of(workload()), "W planned", timeout=90)
        slot = first["podSets"]["main"][0]
        assert (slot["node"], slot["enforcement"]) == (node, "predicted"), slot
        island = sorted(slot["gpus"])
        cluster.wait(lambda: _pinned_and_held(cluster, job, first["planId"]), "W pinned, held by the test")
        forged = [6, 7] if island != [6, 7] else [4, 5]
        ns.apply_one(rogue_pod(node, len(island), forged))
        rogue = cluster.wait(lambda: _held_by(cluster, ns.name, "rogue"), "the rogue pod's devices read back")
        assert rogue == (node, island), "best-effort hands an idle node's first pick to whoever comes first"
        cluster.wait(lambda: events(cluster, ns.name, "GPUDrift", "rogue") or None, "a GPUDrift Event")
        taken = cluster.wait(
            lambda: events(cluster, ns.name, "PredictedGPUsTaken", name) or None,
            "W re-planned (PredictedGPUsTaken)",
            timeout=90,
        )
        assert "rogue" in taken[0]["message"] and node in taken[0]["message"], taken[0]

        def replanned() -> dict[str, Any] | None:
            w = workload()
            r = record_of(w)
            ready = check_state(w, check).get("state") == "Ready"
            return r if r and r["planId"] != first["planId"] and ready else None

        second = cluster.wait(replanned, "W planned again", timeout=150)
        again = second["podSets"]["main"][0]
        assert again["enforcement"] == "predicted" and not set(again["gpus"]) & set(island), again
        retries = check_state(workload(), check).get("retryCount", 0)
        assert retries >= 1, "the check went to Retry (Kueue counts it) before W was admitted again"
        print(f"drift: W planned {island} on {node}, taken by a rogue pod, re-planned to {again['gpus']}")
        pod = cluster.wait(lambda: _pinned_and_held(cluster, job, second["planId"]), "W pinned again")
        cluster.kube.patch(
            "v1", "Pod", pod["metadata"]["name"], {"spec": {"schedulingGates": None}}, namespace=ns.name
        )
        [bound] = cluster.wait_pods(job, 1, phase="Running", timeout=90)
        assert sorted(pod_gpus(bound)) == sorted(again["gpus"])
        devices = cluster.wait(
            lambda: _held_by(cluster, ns.name, bound["metadata"]["name"]), "W's devices read back"
        )
        assert devices == (again["node"], sorted(again["gpus"])), "W holds its new plan"
