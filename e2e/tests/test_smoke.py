"""Smoke tests: the control plane does what optsched will rely on.

Kueue accepts v1beta2 objects, a queued Job goes suspended -> Workload ->
admitted -> pods bound by kube-scheduler to fake GPU nodes -> Succeeded, an
oversized Job waits, and a Kueue TAS flavor keeps a gang inside one rack.
"""

from __future__ import annotations

import time

from e2e.testing import (
    GPU,
    GPU_PRODUCT,
    H100,
    KUEUE_API,
    RACK_LABEL,
    E2ECluster,
    Namespace,
    cluster_queue,
    condition,
    gpu_job,
    has_condition,
    local_queue,
    resource_flavor,
    topology,
)


def _queue(ns: Namespace, *, gpus: int, tas: bool = False) -> str:
    """ResourceFlavor (H100 nodes) + ClusterQueue + LocalQueue; returns the LocalQueue name."""
    objs = []
    topo = None
    if tas:
        topo = ns.unique("topo")
        objs.append(topology(topo))
    flavor = ns.unique("h100")
    objs.append(resource_flavor(flavor, {GPU_PRODUCT: H100}, topology=topo))
    cq = ns.unique("cq")
    objs += [cluster_queue(cq, flavor, gpus), local_queue("lq", cq)]
    ns.apply(objs)
    ns.cluster.wait_condition(KUEUE_API, "ClusterQueue", cq, "Active")
    ns.cluster.wait_condition(KUEUE_API, "LocalQueue", "lq", "Active", namespace=ns.name)
    return "lq"


def test_kueue_objects_accepted_as_v1beta2(cluster: E2ECluster, ns: Namespace) -> None:
    _queue(ns, gpus=16, tas=True)
    for kind, name, namespace in (
        ("Topology", ns.unique("topo"), None),
        ("ResourceFlavor", ns.unique("h100"), None),
        ("ClusterQueue", ns.unique("cq"), None),
        ("LocalQueue", "lq", ns.name),
    ):
        obj = cluster.get(KUEUE_API, kind, name, namespace)
        assert obj is not None, f"{kind} {name} not found"
        assert obj["apiVersion"] == KUEUE_API
    rf = cluster.get(KUEUE_API, "ResourceFlavor", ns.unique("h100"))
    assert rf and rf["spec"]["topologyName"] == ns.unique("topo")
    cq = cluster.get(KUEUE_API, "ClusterQueue", ns.unique("cq"))
    assert cq is not None
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: str(r["nominalQuota"]) for r in quota}[GPU] == "16"
    # Stored as v1beta2, still served as v1beta1 through Kueue's conversion webhook.
    old = cluster.get("kueue.x-k8s.io/v1beta1", "ClusterQueue", ns.unique("cq"))
    assert old is not None and old["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def test_job_is_admitted_scheduled_and_completes(cluster: E2ECluster, ns: Namespace) -> None:
    queue = _queue(ns, gpus=64)
    created = ns.apply_one(gpu_job("train", queue, pods=2, gpus_per_pod=2, run_duration="3s"))
    # Kueue's webhook suspends a queued Job at creation, before any pod exists.
    assert created["spec"]["suspend"] is True

    job = created
    wl = cluster.wait_workload(job)
    assert wl["spec"]["queueName"] == queue
    wl = cluster.wait_condition(KUEUE_API, "Workload", wl["metadata"]["name"], "Admitted", namespace=ns.name)
    flavors = wl["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors[GPU] == ns.unique("h100")

    h100_nodes = {n["metadata"]["name"] for n in cluster.gpu_nodes(H100)}
    pods = cluster.wait_pods(job, 2)
    for pod in pods:
        assert pod["spec"]["nodeName"] in h100_nodes, (
            "Kueue's flavor nodeSelector must pin pods to H100 nodes"
        )
        assert pod["spec"]["nodeSelector"][GPU_PRODUCT] == H100
        assert pod["spec"]["schedulerName"] == "default-scheduler"

    job = cluster.wait_condition("batch/v1", "Job", "train", "Complete", namespace=ns.name)
    assert job["status"]["succeeded"] == 2
    assert all(p["status"]["phase"] == "Succeeded" for p in cluster.pods_of(job))
    cluster.wait_condition(KUEUE_API, "Workload", wl["metadata"]["name"], "Finished", namespace=ns.name)


def test_job_larger_than_cluster_stays_pending(cluster: E2ECluster, ns: Namespace) -> None:
    total = cluster.gpu_capacity()
    h100 = cluster.gpu_capacity(H100)
    queue = _queue(ns, gpus=h100)
    pods = total // 8 + 1  # more 8-GPU pods than the whole cluster has GPUs for
    job = ns.apply_one(gpu_job("too-big", queue, pods=pods, gpus_per_pod=8))
    wl = cluster.wait_workload(job)
    name = wl["metadata"]["name"]

    def pending_reason() -> str | None:
        w = cluster.get(KUEUE_API, "Workload", name, ns.name)
        c = condition(w, "QuotaReserved")
        return c.get("message") if c and c["status"] == "False" and c.get("message") else None

    message: str = cluster.wait(pending_reason, "Kueue to explain why the Workload waits")
    assert "insufficient" in message.lower() or "exceed" in message.lower(), message
    time.sleep(5)  # give Kueue a few more scheduling cycles to (wrongly) admit it
    after = cluster.get(KUEUE_API, "Workload", name, ns.name)
    assert not has_condition(after, "Admitted") and not has_condition(after, "QuotaReserved")
    still = cluster.get("batch/v1", "Job", "too-big", ns.name)
    assert still and still["spec"]["suspend"] is True
    assert cluster.pods_of(still) == []


def test_tas_places_gang_in_one_rack(cluster: E2ECluster, ns: Namespace) -> None:
    queue = _queue(ns, gpus=cluster.gpu_capacity(H100), tas=True)
    job = ns.apply_one(
        gpu_job(
            "gang",
            queue,
            pods=4,
            gpus_per_pod=4,
            template_annotations={"kueue.x-k8s.io/podset-required-topology": RACK_LABEL},
        )
    )
    wl = cluster.wait_workload(job)
    wl = cluster.wait_condition(KUEUE_API, "Workload", wl["metadata"]["name"], "Admitted", namespace=ns.name)
    assert wl["status"]["admission"]["podSetAssignments"][0].get("topologyAssignment"), (
        "Kueue TAS did not assign a topology"
    )

    pods = cluster.wait_pods(job, 4, phase="Running")
    nodes = {n["metadata"]["name"]: n for n in cluster.gpu_nodes(H100)}
    racks = {nodes[p["spec"]["nodeName"]]["metadata"]["labels"][RACK_LABEL] for p in pods}
    assert len(racks) == 1, f"gang spread over racks {sorted(racks)}"
    # The rack must really have room for the gang: 4 pods x 4 GPUs.
    used: dict[str, int] = {}
    for p in pods:
        used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + 4
    for node, gpus in used.items():
        assert gpus <= int(nodes[node]["status"]["allocatable"][GPU])
