"""optsched run on DRA nodes, with the real kube-scheduler as the judge of every claim.

The small profile's four H200 nodes are DRA nodes (the simulated agent
publishes their ResourceSlices). The webhook names each pod's claim at
creation, the controller creates it at ungate time selecting the planned
UUIDs, and kube-scheduler's DRA allocator allocates exactly those or nothing:

* a mixed queue: every claim's allocation names the planned devices, none twice,
  every multi-GPU pod inside one NVLink island; a tenant's pod naming one of
  those claims is refused;
* a planned GPU that turns unhealthy while its pod is held (a scheduling gate of
  the test's own): the workload is re-planned onto healthy GPUs, nothing stays Pending;
* the controller killed right after a claim is created, before the ungate:
  after a restart every pod runs, one claim each, nothing claimed twice;
* an optsched claim whose pod is gone (deleted with orphan propagation, so
  Kubernetes' garbage collector leaves it) is swept by the controller.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.agent_helpers import NODE_GPUS_API, AgentProcess, running_agent, slices_of
from e2e.kube import ApiError
from e2e.optsched_helpers import PLAN_ID, POD_INDEX, optsched_queue, record_of
from e2e.testing import E2ECluster, Namespace, gpu_job
from e2e.tests.test_controller import controller, gang
from optsched.agent.resource_slices import SIMULATED_DRA_LABEL, slice_name
from optsched.agent.simulated import inject_xid
from optsched.controller.fault import AFTER_CLAIM_CREATED, FAULT_ENV
from optsched.model.names import (
    CLAIM_PLAN_LABEL,
    DRA_GPU_DEVICE_CLASS,
    GPU_UUIDS_ANNOTATION,
    POD_CLAIM_NAME,
    RESOURCE_API,
    SCHEDULING_GATE,
)

DRA_NODES = [f"h200-{i:03d}" for i in range(4)]
ON_DRA = {SIMULATED_DRA_LABEL: "true"}
TEST_GATE = "e2e.optsched.io/hold"


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    state = tmp_path_factory.mktemp("agent-state")
    with running_agent(cluster, state, ready=slices_of(DRA_NODES), what="a slice per DRA node") as proc:
        yield proc


def _devices(cluster: E2ECluster, node: str) -> dict[str, str]:
    """Device name -> UUID in the node's slice."""
    found = cluster.get(RESOURCE_API, "ResourceSlice", slice_name(node)) or {}
    return {
        d["name"]: d["attributes"]["uuid"]["string"] for d in (found.get("spec") or {}).get("devices", [])
    }


def _gpus(cluster: E2ECluster, node: str) -> tuple[dict[str, int], list[list[int]]]:
    """UUID -> index, and the NVLink islands by index, as the agent reports them."""
    status = (cluster.get(NODE_GPUS_API, "NodeGPUs", node) or {}).get("status") or {}
    return {g["uuid"]: g["index"] for g in status.get("gpus", [])}, status.get("nvlinkIslands") or []


def _claim_name(pod: dict[str, Any]) -> str:
    [entry] = [e for e in pod["spec"].get("resourceClaims") or [] if e["name"] == POD_CLAIM_NAME]
    return str(entry["resourceClaimName"])


def _allocated(cluster: E2ECluster, pod: dict[str, Any]) -> list[dict[str, Any]]:
    claim = cluster.get(RESOURCE_API, "ResourceClaim", _claim_name(pod), pod["metadata"]["namespace"]) or {}
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def assert_claims_as_planned(cluster: E2ECluster, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pod's claim is allocated exactly its slot's UUIDs on its node; no device twice; islands kept."""
    seen: dict[tuple[str, str], str] = {}
    pods = []
    for job in jobs:
        record = record_of(cluster.workload_for(job) or {})
        assert record is not None, f"{job['metadata']['name']}: no placement record"
        for pod in cluster.pods_of(job):
            name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
            pod_set = pod["metadata"]["labels"].get("optsched.io/podset", "main")
            index = int(pod["metadata"]["annotations"][POD_INDEX])
            slot = next(s for s in record["podSets"][pod_set] if s["index"] == index)
            assert slot["enforcement"] == "dra" and slot["node"] == node
            results = _allocated(cluster, pod)
            devices = _devices(cluster, node)
            got = sorted(devices[r["device"]] for r in results)
            assert got == sorted(slot["gpuUUIDs"]), f"{name}: allocated {got}, planned {slot['gpuUUIDs']}"
            assert got == sorted(pod["metadata"]["annotations"][GPU_UUIDS_ANNOTATION].split(","))
            assert {r["pool"] for r in results} == {node}
            for r in results:
                held = seen.setdefault((node, r["device"]), name)
                assert held == name, f"{node}/{r['device']} allocated to {held} and {name}"
            index_of, islands = _gpus(cluster, node)
            chosen = {index_of[u] for u in got}
            if len(chosen) > 1:
                assert any(chosen <= set(i) for i in islands), f"{name}: {sorted(chosen)} spans islands"
            pods.append(pod)
    return pods


def test_a_mixed_queue_gets_exactly_its_planned_devices_and_a_tenant_cannot_name_its_claims(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check, gpus=32, node_labels=ON_DRA)
        specs = [
            (gpu_job("one-1", "lq", pods=1, gpus_per_pod=1), 1),
            (gpu_job("one-2", "lq", pods=1, gpus_per_pod=2), 1),
            (gpu_job("one-4", "lq", pods=1, gpus_per_pod=4), 1),
            (gpu_job("one-8", "lq", pods=1, gpus_per_pod=8), 1),
            (gang("gang", 2, 4), 2),
        ]
        jobs = [(ns.apply_one(job), n) for job, n in specs]
        for job, n in jobs:
            cluster.wait_pods(job, n, phase="Running", timeout=180)
        pods = assert_claims_as_planned(cluster, [j for j, _ in jobs])
        print(f"mixed queue on DRA nodes: {len(pods)} pods, every claim allocated exactly as planned")

        victim = pods[0]
        tenant = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tenant", "labels": {PLAN_ID: victim["metadata"]["labels"][PLAN_ID]}},
            "spec": {
                "resourceClaims": [{"name": "stolen", "resourceClaimName": _claim_name(victim)}],
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox:1.36",
                        "resources": {"claims": [{"name": "stolen"}]},
                    }
                ],
            },
        }
        with pytest.raises(ApiError) as refused:
            ns.apply_one(tenant)
        assert "only optsched names claims" in str(refused.value)
        assert cluster.get("v1", "Pod", "tenant", ns.name) is None


def _lift_test_gate(cluster: E2ECluster, job: dict[str, Any]) -> None:
    for pod in cluster.pods_of(job):
        gates = _gates(pod)
        if TEST_GATE in gates and not pod["metadata"].get("deletionTimestamp"):
            kept = [{"name": g} for g in gates if g != TEST_GATE] or None
            with contextlib.suppress(ApiError):  # changed or gone meanwhile: the next round sees it again
                cluster.kube.patch(
                    "v1",
                    "Pod",
                    pod["metadata"]["name"],
                    {"spec": {"schedulingGates": kept}},
                    namespace=pod["metadata"]["namespace"],
                )


def _held_job(name: str, pods: int, gpus: int) -> dict[str, Any]:
    job = gpu_job(name, "lq", pods=pods, gpus_per_pod=gpus)
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": TEST_GATE}]
    return job


def _pinned(cluster: E2ECluster, job: dict[str, Any], count: int) -> list[dict[str, Any]] | None:
    pods = [
        p for p in cluster.pods_of(job) if GPU_UUIDS_ANNOTATION in (p["metadata"].get("annotations") or {})
    ]
    ready = [p for p in pods if SCHEDULING_GATE not in _gates(p)]
    return ready if len(ready) == count else None


def test_a_planned_gpu_that_turns_unhealthy_before_bind_is_replanned_and_nothing_stays_pending(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check, gpus=32, node_labels=ON_DRA)
        job = ns.apply_one(_held_job("held", 1, 2))
        [pod] = cluster.wait(lambda: _pinned(cluster, job, 1), "the held pod pinned, its claim made", 120)
        node = pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        broken = pod["metadata"]["annotations"][GPU_UUIDS_ANNOTATION].split(",")[0]
        assert cluster.get(RESOURCE_API, "ResourceClaim", _claim_name(pod), ns.name) is not None
        index_of, _ = _gpus(cluster, node)
        inject_xid(agent.state_dir / node, index_of[broken], 79, "GPU has fallen off the bus")
        cluster.wait(
            lambda: broken not in _devices(cluster, node).values() or None, "the GPU leaves the slice", 60
        )

        def running() -> list[dict[str, Any]] | None:
            _lift_test_gate(cluster, job)
            pods = cluster.pods_of(job)
            ok = len(pods) == 1 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
            return pods if ok else None

        [now] = cluster.wait(running, "the re-planned pod running on healthy GPUs", 180)
        assert broken not in now["metadata"]["annotations"][GPU_UUIDS_ANNOTATION].split(",")
        assert_claims_as_planned(cluster, [job])
        events = [
            e for e in cluster.list("v1", "Event", ns.name) if e.get("reason") == "PlannedGPUUnavailable"
        ]
        assert events and broken in events[0]["message"], "no PlannedGPUUnavailable Event naming the GPU"
        print(f"unhealthy before bind: {events[0]['message']}")


def test_a_controller_killed_between_claim_and_ungate_loses_nothing_after_restart(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, AFTER_CLAIM_CREATED)
    with controller(cluster, ns) as (proc, check):
        monkeypatch.delenv(FAULT_ENV)
        optsched_queue(ns, check, gpus=32, node_labels=ON_DRA)
        job = ns.apply_one(gpu_job("killed", "lq", pods=2, gpus_per_pod=1))
        cluster.wait(lambda: not proc.running() or None, "the controller killed after a claim", 120)
        claims = [
            c
            for c in cluster.list(RESOURCE_API, "ResourceClaim", ns.name)
            if CLAIM_PLAN_LABEL in (c["metadata"].get("labels") or {})
        ]
        assert claims, "a claim was created before the kill"
        assert all(SCHEDULING_GATE in _gates(p) for p in cluster.pods_of(job)), "no pod was ungated"
        before = {c["metadata"]["name"]: c["metadata"]["uid"] for c in claims}
        proc.start()
        pods = cluster.wait_pods(job, 2, phase="Running", timeout=120)
        assert_claims_as_planned(cluster, [job])
        after = {
            c["metadata"]["name"]: c["metadata"]["uid"]
            for c in cluster.list(RESOURCE_API, "ResourceClaim", ns.name)
        }
        assert sorted(after) == sorted(_claim_name(p) for p in pods), "one claim per pod, none more"
        assert all(after[name] == uid for name, uid in before.items()), (
            "the claim made before the kill was kept"
        )
        print(f"kill between claim and ungate: {len(before)} claim(s) kept, {len(pods)} pods running")


def test_an_optsched_claim_whose_pod_is_gone_is_swept(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    def holder(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulingGates": [{"name": TEST_GATE}],
                "containers": [{"name": "c", "image": "busybox:1.36"}],
            },
        }

    def claim(name: str, owner: dict[str, Any]) -> dict[str, Any]:
        ref = {"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"]}
        return {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "labels": {CLAIM_PLAN_LABEL: "v2-e2e"},
                "ownerReferences": [{**ref, "uid": owner["metadata"]["uid"], "controller": True}],
            },
            "spec": {
                "devices": {
                    "requests": [{"name": "gpus-0", "exactly": {"deviceClassName": DRA_GPU_DEVICE_CLASS}}]
                }
            },
        }

    with controller(cluster, ns, "--orphan-claim-seconds", "2") as (proc, _check):
        gone, live = ns.apply_one(holder("gone")), ns.apply_one(holder("live"))
        ns.apply([claim("optsched-e2e-orphan-0", gone), claim("optsched-e2e-kept-0", live)])
        cluster.kube.delete("v1", "Pod", "gone", ns.name, propagation="Orphan")
        cluster.wait(
            lambda: (
                cluster.get(RESOURCE_API, "ResourceClaim", "optsched-e2e-orphan-0", ns.name) is None or None
            ),
            "the orphaned claim swept",
            90,
        )
        assert f"swept ResourceClaim {ns.name}/optsched-e2e-orphan-0" in proc.log()
        time.sleep(3)
        assert cluster.get(RESOURCE_API, "ResourceClaim", "optsched-e2e-kept-0", ns.name) is not None
