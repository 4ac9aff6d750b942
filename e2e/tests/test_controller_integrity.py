"""optsched run on the real control plane where Kueue or kube-scheduler disagree with a plan.

Partial admission (Kueue reserves fewer pods than the Job asks for), a Ready
write based on a Workload that changed meanwhile (the API server refuses
it), and a pinned pod kube-scheduler cannot bind (the workload is planned
again instead of waiting forever).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from e2e.optsched_helpers import check_state, optsched_queue, record_of
from e2e.testing import HOSTNAME_LABEL, KUEUE_API, E2ECluster, Namespace, gpu_job
from e2e.tests.test_controller import controller
from optsched.kube.client import ApiError, Client
from optsched.kube.writer import Writer

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def test_a_partially_admitted_job_gets_exactly_its_reserved_pod_count(
    cluster: E2ECluster, ns: Namespace
) -> None:
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check, gpus=16)
        job = gpu_job("partial", "lq", pods=4, gpus_per_pod=8)
        job["metadata"]["annotations"] = {MIN_PARALLELISM: "2"}
        job = ns.apply_one(job)
        pods = cluster.wait_pods(job, 2, phase="Running", timeout=120)
        wl = cluster.workload_for(job)
        assert wl is not None
        [assignment] = wl["status"]["admission"]["podSetAssignments"]
        assert assignment["count"] == 2, "Kueue reserved quota for 2 of the 4 pods"
        record = record_of(wl)
        assert record is not None and len(record["podSets"][assignment["name"]]) == 2
        assert check_state(wl, check).get("state") == "Ready"
        time.sleep(3)
        live = [p for p in cluster.pods_of(job) if p["status"].get("phase") != "Succeeded"]
        assert len(live) == 2 and all(p["spec"].get("nodeName") for p in live)
        print(f"partial admission: {len(pods)} of 4 pods reserved, planned and bound")


def _apply_check_on(kubeconfig: str, wl: dict[str, Any], check: str, resource_version: str) -> int:
    """Apply our check Ready on ``resource_version`` through optsched's own writer; the HTTP status."""

    async def go() -> int:
        client = await Client.connect(kubeconfig)
        entry = {
            "name": check,
            "state": "Pending",
            "message": "precondition test",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        md = wl["metadata"]
        try:
            await Writer(client).apply_check(
                md["namespace"], md["name"], entry, uid=md["uid"], resource_version=resource_version
            )
        except ApiError as exc:
            return exc.status
        finally:
            session = getattr(client.transport, "_session", None)  # kr8s's httpx client: closed with the test
            if session is not None:
                await session.aclose()
        return 200

    return asyncio.run(go())


def test_a_check_write_decided_on_an_older_workload_is_refused(cluster: E2ECluster, ns: Namespace) -> None:
    with controller(cluster, ns) as (proc, check):
        optsched_queue(ns, check, gpus=16)
        job = ns.apply_one(
            gpu_job("never", "lq", pods=1, gpus_per_pod=8, node_selector={"example.com/none": "x"})
        )
        wl = cluster.wait(
            lambda: ((w := cluster.workload_for(job)) and check_state(w, check).get("message") and w) or None,
            "the workload waits on our check with a message",
            timeout=90,
        )
        proc.stop()
    stale = wl["metadata"]["resourceVersion"]
    md = wl["metadata"]
    cluster.kube.patch(
        KUEUE_API,
        "Workload",
        md["name"],
        {"metadata": {"labels": {"touched": "yes"}}},
        namespace=md["namespace"],
    )
    assert _apply_check_on(str(cluster.kubeconfig), wl, check, stale) == 409
    fresh = cluster.get(KUEUE_API, "Workload", md["name"], md["namespace"])
    assert fresh is not None
    assert _apply_check_on(str(cluster.kubeconfig), fresh, check, fresh["metadata"]["resourceVersion"]) == 200


def _port_holder(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "port-holder"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "busybox:1.36", "ports": [{"containerPort": 9999, "hostPort": 9999}]}
            ],
        },
    }


def test_a_pinned_pod_kube_scheduler_cannot_bind_gets_its_workload_replanned(
    cluster: E2ECluster, ns: Namespace
) -> None:
    node = sorted(n["metadata"]["name"] for n in cluster.gpu_nodes())[0]
    holder = ns.apply_one(_port_holder(node))
    with controller(cluster, ns, "--unschedulable-seconds", "5") as (proc, check):
        optsched_queue(ns, check, gpus=16)
        job = gpu_job("blocked", "lq", pods=1, gpus_per_pod=1, node_selector={HOSTNAME_LABEL: node})
        job["spec"]["template"]["spec"]["containers"][0]["ports"] = [
            {"containerPort": 9999, "hostPort": 9999}
        ]
        job = ns.apply_one(job)

        def replanned() -> bool | None:
            return "could not bind" in proc.log() or None

        cluster.wait(replanned, "the unbindable pin is re-planned", timeout=120)
        events = [
            e for e in cluster.list("v1", "Event", ns.name) if e.get("reason") == "PinnedPodUnschedulable"
        ]
        assert events, "no PinnedPodUnschedulable Event on the Workload"
        cluster.delete(holder)
        pods = cluster.wait_pods(job, 1, phase="Running", timeout=180)
        assert pods[0]["spec"]["nodeName"] == node
        print(f"unbindable pin: re-planned with Event {events[0]['message']!r}; bound once the port was free")
