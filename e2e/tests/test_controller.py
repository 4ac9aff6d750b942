"""optsched run against the real control plane: admission, pinning, gangs, dry-run, bad input, restarts.

Each test gets its own AdmissionCheck and controller name, its own
ClusterQueue and its own controller process (plus a webhook scoped to the
test namespace), so tests never see each other's workloads.
"""

from __future__ import annotations

import copy
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from e2e.optsched_helpers import (
    PLAN_ID,
    POD_INDEX,
    REQUIRED_TOPOLOGY,
    ControllerProcess,
    admission_check,
    check_state,
    gpus_of,
    optsched_queue,
    pod_gpus,
    record_of,
    run_once,
    wait_check_ready,
    webhook_controller,
)
from e2e.testing import (
    GPU_PRODUCT,
    H100,
    HOSTNAME_LABEL,
    KUEUE_API,
    RACK_LABEL,
    E2ECluster,
    Namespace,
    gpu_job,
)

FAST = ("--interval", "2", "--debounce", "0.5", "--time-limit", "5", "--workers", "1")
TOPOLOGY_ANNOTATION = "optsched.io/gpu-topology"


@contextmanager
def controller(
    cluster: E2ECluster, ns: Namespace, *extra: str, webhook_on: bool = True
) -> Iterator[tuple[ControllerProcess, str]]:
    """An AdmissionCheck of our own, the controller serving it, and a webhook for this namespace."""
    proc, check = webhook_controller(cluster, ns, *FAST, *extra, webhook_on=webhook_on)
    proc.start()
    try:
        if "--dry-run" not in extra:
            cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=60)
        yield proc, check
    finally:
        proc.stop()
        print(f"--- controller log ({proc.log_path}) tail ---\n" + "\n".join(proc.log().splitlines()[-60:]))


def gang(name: str, pods: int, gpus: int, *, level: str = RACK_LABEL, **kw: Any) -> dict[str, Any]:
    return gpu_job(
        name, "lq", pods=pods, gpus_per_pod=gpus, template_annotations={REQUIRED_TOPOLOGY: level}, **kw
    )


def nodes_by_name(cluster: E2ECluster) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in cluster.list("v1", "Node")}


def islands_of(node: dict[str, Any]) -> list[list[int]]:
    raw = (node["metadata"].get("annotations") or {}).get(TOPOLOGY_ANNOTATION)
    if not raw:
        count = int(node["status"]["allocatable"].get("nvidia.com/gpu", 0))
        return [[i] for i in range(count)]
    return list(json.loads(raw).get("nvlinkIslands") or [])


def assert_pinned_as_planned(cluster: E2ECluster, job: dict[str, Any], check: str) -> list[dict[str, Any]]:
    """Every pod of the job sits on the node its slot of the record names, with the slot's GPUs."""
    wl = cluster.workload_for(job)
    assert wl is not None
    assert check_state(wl, check).get("state") == "Ready"
    record = record_of(wl)
    assert record is not None, f"{job['metadata']['name']}: no placement record"
    pods = [p for p in cluster.pods_of(job) if p["status"].get("phase") not in ("Succeeded", "Failed")]
    seen: set[tuple[str, int]] = set()
    for pod in pods:
        labels, annotations = pod["metadata"]["labels"], pod["metadata"].get("annotations") or {}
        assert labels.get(PLAN_ID) == record["planId"]
        pod_set = labels.get("optsched.io/podset", "main")
        index = int(annotations[POD_INDEX])
        assert (pod_set, index) not in seen, f"slot {pod_set}[{index}] pinned twice"
        seen.add((pod_set, index))
        slot = next(s for s in record["podSets"][pod_set] if s["index"] == index)
        assert pod["spec"]["nodeName"] == slot["node"], f"{pod['metadata']['name']} bound off-plan"
        assert pod["spec"]["nodeSelector"][HOSTNAME_LABEL] == slot["node"]
        if slot.get("gpus") is not None:
            assert pod_gpus(pod) == slot["gpus"]
        assert not pod["spec"].get("schedulingGates")
    return pods


def assert_no_gpu_overcommit(cluster: E2ECluster, pods: list[dict[str, Any]]) -> None:
    nodes = nodes_by_name(cluster)
    used: dict[str, list[int]] = defaultdict(list)
    for pod in pods:
        used[pod["spec"]["nodeName"]] += pod_gpus(pod)
    for node, gpus in used.items():
        assert len(gpus) == len(set(gpus)), f"GPU given twice on {node}: {sorted(gpus)}"
        assert len(gpus) <= int(nodes[node]["status"]["allocatable"]["nvidia.com/gpu"])


def test_mixed_queue_every_pod_binds_to_its_planned_node(cluster: E2ECluster, ns: Namespace) -> None:
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check)
        specs = [
            (gpu_job("one-4", "lq", pods=1, gpus_per_pod=4), 1),
            (gpu_job("two-2", "lq", pods=2, gpus_per_pod=2), 2),
            (gpu_job("three-1", "lq", pods=3, gpus_per_pod=1), 3),
            (gpu_job("one-8", "lq", pods=1, gpus_per_pod=8, node_selector={GPU_PRODUCT: H100}), 1),
            (gang("gang", 4, 8), 4),
        ]
        started = time.monotonic()
        jobs = [(ns.apply_one(job), n) for job, n in specs]
        for job, n in jobs:
            cluster.wait_pods(job, n, phase="Running", timeout=180)
        elapsed = time.monotonic() - started
        nodes = nodes_by_name(cluster)
        every_pod = []
        for job, _ in jobs:
            every_pod += assert_pinned_as_planned(cluster, job, check)
        assert_no_gpu_overcommit(cluster, every_pod)
        multi = [p for p in every_pod if gpus_of(p) > 1]
        for pod in multi:
            node = nodes[pod["spec"]["nodeName"]]
            islands = islands_of(node)
            if gpus_of(pod) <= max(len(i) for i in islands):
                assert any(set(pod_gpus(pod)) <= set(i) for i in islands), (
                    f"{pod['metadata']['name']} spans NVLink islands on {node['metadata']['name']}"
                )
        gang_pods = cluster.pods_of(jobs[-1][0])
        racks = {nodes[p["spec"]["nodeName"]]["metadata"]["labels"][RACK_LABEL] for p in gang_pods}
        assert len(racks) == 1, f"gang spans racks {racks}"
        print(
            f"mixed queue: {len(every_pod)} pods, {sum(gpus_of(p) for p in every_pod)} GPUs admitted and "
            f"bound as planned in {elapsed:.1f}s; {len(multi)} multi-GPU pods all inside one NVLink island"
        )


def test_gang_that_does_not_fit_never_starts_a_pod_until_capacity_frees(
    cluster: E2ECluster, ns: Namespace
) -> None:
    h100_free = cluster.gpu_capacity(H100)
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check)
        filler_pods = (h100_free - 16) // 8
        filler = ns.apply_one(
            gpu_job(
                "filler",
                "lq",
                pods=filler_pods,
                gpus_per_pod=8,
                run_duration="25s",
                node_selector={GPU_PRODUCT: H100},
            )
        )
        cluster.wait_pods(filler, filler_pods, phase="Running", timeout=120)
        big = ns.apply_one(gpu_job("big", "lq", pods=4, gpus_per_pod=8, node_selector={GPU_PRODUCT: H100}))
        wl = cluster.wait_workload(big)
        name = wl["metadata"]["name"]
        waiting = cluster.wait(
            lambda: (
                lambda w: (
                    w if check_state(w, check).get("message", "").startswith("optsched: waiting") else None
                )
            )(cluster.get(KUEUE_API, "Workload", name, ns.name)),
            "deferral message on the gang",
            timeout=60,
        )
        message = check_state(waiting, check)["message"]
        while any(p["status"].get("phase") == "Running" for p in cluster.pods_of(filler)):
            assert cluster.pods_of(big) == [], "a pod of the deferred gang exists"
            time.sleep(1)
        cluster.wait_pods(big, 4, phase="Running", timeout=120)
        assert_pinned_as_planned(cluster, big, check)
        print(f"all-or-nothing: gang waited with {message!r}, then all 4 pods bound")


def test_dry_run_changes_nothing(cluster: E2ECluster, ns: Namespace) -> None:
    check = ns.unique("optsched")
    name = f"optsched.io/{check}"
    ns.apply(admission_check(check, name))
    done = run_once(cluster.kubeconfig, "--check-name", check, "--controller-name", name)
    assert done.returncode == 0, done.stderr
    cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=30)
    optsched_queue(ns, check)
    proc = ControllerProcess(
        cluster.kubeconfig, "--check-name", check, "--controller-name", name, *FAST, "--dry-run"
    ).start()
    try:
        job = ns.apply_one(gpu_job("dry", "lq", pods=2, gpus_per_pod=4))
        wl = cluster.wait_workload(job)
        cluster.wait_condition(
            KUEUE_API, "Workload", wl["metadata"]["name"], "QuotaReserved", namespace=ns.name
        )
        cluster.wait(
            lambda: "dry-run: would apply-status" in proc.log() or None, "a dry-run cycle", timeout=60
        )
        time.sleep(4)
        after = cluster.get(KUEUE_API, "Workload", wl["metadata"]["name"], ns.name)
        assert after is not None
        assert check_state(after, check).get("state") == "Pending"
        assert not check_state(after, check).get("message", "").startswith("optsched")
        assert record_of(after) is None
        assert cluster.pods_of(job) == []
        current = cluster.get("batch/v1", "Job", job["metadata"]["name"], ns.name)
        assert current is not None and current["spec"]["suspend"] is True
        managed = [m.get("manager") for m in after["metadata"].get("managedFields", [])]
        assert "optsched" not in managed
    finally:
        proc.stop()
        print(proc.log()[-3000:])


@contextmanager
def broken_node_annotation(cluster: E2ECluster, node: str) -> Iterator[None]:
    original = cluster.get("v1", "Node", node)
    assert original is not None
    before = (original["metadata"].get("annotations") or {}).get(TOPOLOGY_ANNOTATION)
    cluster.kube.patch("v1", "Node", node, {"metadata": {"annotations": {TOPOLOGY_ANNOTATION: "{not json"}}})
    try:
        yield
    finally:
        cluster.kube.patch("v1", "Node", node, {"metadata": {"annotations": {TOPOLOGY_ANNOTATION: before}}})


def test_invalid_input_is_reported_and_skipped_while_the_rest_is_admitted(
    cluster: E2ECluster, ns: Namespace
) -> None:
    bad = "h100-007"
    with broken_node_annotation(cluster, bad), controller(cluster, ns) as (proc, check):
        optsched_queue(ns, check)
        ghost = ns.apply_one(
            gpu_job("ghost", "lq", pods=1, gpus_per_pod=1, node_selector={GPU_PRODUCT: "NVIDIA-B300-SXM"})
        )
        fine = [
            ns.apply_one(
                gpu_job(f"fine-{i}", "lq", pods=1, gpus_per_pod=8, node_selector={GPU_PRODUCT: H100})
            )
            for i in range(3)
        ]
        for job in fine:
            cluster.wait_pods(job, 1, phase="Running", timeout=120)
            pods = assert_pinned_as_planned(cluster, job, check)
            assert all(p["spec"]["nodeName"] != bad for p in pods)
        ghost_wl = cluster.wait_workload(ghost)
        entry = cluster.wait(
            lambda: (lambda e: e if e.get("message", "").startswith("optsched: waiting") else None)(
                check_state(cluster.get(KUEUE_API, "Workload", ghost_wl["metadata"]["name"], ns.name), check)
            ),
            "deferral of the workload asking for a missing product",
            timeout=60,
        )
        events = [
            e
            for e in cluster.list("v1", "Event", "default")
            if e["involvedObject"].get("name") == bad and e.get("reason") == "InvalidNode"
        ]
        assert events, "no Event on the node with the malformed annotation"
        assert proc.running()
        print(
            f"invalid input: node {bad} skipped with Event {events[0]['message']!r}; "
            f"ghost waits: {entry['message']!r}"
        )


def test_controller_killed_mid_cycle_restarts_without_losing_or_double_pinning(
    cluster: E2ECluster, ns: Namespace
) -> None:
    with controller(cluster, ns) as (first, check):
        optsched_queue(ns, check)
        jobs = [ns.apply_one(gpu_job(f"job-{i}", "lq", pods=2, gpus_per_pod=2)) for i in range(6)]

        def some_record() -> bool | None:
            wls = cluster.list(KUEUE_API, "Workload", ns.name)
            return True if any(record_of(w) for w in wls) else None

        cluster.wait(some_record, "a first placement record", timeout=90)
        first.kill()
    # The same check, names, webhook port and certificate: a restart, as a Deployment would do it.
    restarted = ControllerProcess(cluster.kubeconfig, *first.args).start()
    try:
        pods = []
        for job in jobs:
            cluster.wait_pods(job, 2, phase="Running", timeout=180)
            pods += assert_pinned_as_planned(cluster, job, check)
        assert_no_gpu_overcommit(cluster, pods)
        before = first.log().count("admitted ")
        print(
            f"restart: killed after {before} admission(s); after restart all {len(jobs)} workloads "
            f"({len(pods)} pods) admitted and bound, each slot pinned once"
        )
    finally:
        restarted.stop()
        print(restarted.log()[-3000:])


@pytest.fixture
def extra_nodes(cluster: E2ECluster, ns: Namespace) -> Iterator[list[str]]:
    template = cluster.get("v1", "Node", "h100-000")
    assert template is not None
    names = [ns.unique(f"extra-{i}") for i in range(2)]
    for name in names:
        node = copy.deepcopy(template)
        metadata = node["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
            metadata.pop(key, None)
        metadata["name"] = name
        metadata["labels"] = {**metadata["labels"], HOSTNAME_LABEL: name, "e2e.optsched.io/pool": ns.suffix}
        node["status"] = {
            "capacity": template["status"]["capacity"],
            "allocatable": template["status"]["allocatable"],
        }
        node.pop("spec", None)
        cluster.kube.create(node)
    for name in names:
        cluster.wait_condition("v1", "Node", name, "Ready", timeout=60)
    try:
        yield names
    finally:
        for name in names:
            cluster.kube.delete("v1", "Node", name)


def test_node_deleted_before_its_pods_bind_is_replanned(
    cluster: E2ECluster, ns: Namespace, extra_nodes: list[str]
) -> None:
    hold = "e2e.optsched.io/hold"
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check)
        job = gpu_job(
            "moved", "lq", pods=1, gpus_per_pod=8, node_selector={"e2e.optsched.io/pool": ns.suffix}
        )
        job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": hold}]
        job = ns.apply_one(job)
        wl = cluster.wait_workload(job)
        name = wl["metadata"]["name"]
        first = cluster.wait(
            lambda: record_of(cluster.get(KUEUE_API, "Workload", name, ns.name) or {}),
            "first placement",
            timeout=90,
        )
        planned = first["podSets"]["main"][0]["node"]
        pods = cluster.wait(
            lambda: (
                [p for p in cluster.pods_of(job) if (p["spec"].get("nodeSelector") or {}).get(HOSTNAME_LABEL)]
                or None
            ),
            "pod pinned (still held by the test's own gate)",
            timeout=90,
        )
        assert pods[0]["spec"]["nodeSelector"][HOSTNAME_LABEL] == planned
        cluster.kube.delete("v1", "Node", planned)

        def replanned() -> dict[str, Any] | None:
            w = cluster.get(KUEUE_API, "Workload", name, ns.name) or {}
            r = record_of(w)
            return (
                r
                if r
                and r["podSets"]["main"][0]["node"] != planned
                and check_state(w, check).get("state") == "Ready"
                else None
            )

        second = cluster.wait(replanned, "a new placement away from the deleted node", timeout=150)
        other = second["podSets"]["main"][0]["node"]
        assert other in extra_nodes and other != planned

        def release() -> list[dict[str, Any]] | None:
            out = []
            for pod in cluster.pods_of(job):
                gates = [g for g in pod["spec"].get("schedulingGates") or [] if g["name"] != hold]
                if (
                    pod["spec"].get("schedulingGates")
                    and not gates
                    and (pod["spec"].get("nodeSelector") or {}).get(HOSTNAME_LABEL) == other
                ):
                    cluster.kube.patch(
                        "v1",
                        "Pod",
                        pod["metadata"]["name"],
                        {"spec": {"schedulingGates": None}},
                        namespace=ns.name,
                    )
                    out.append(pod)
            return out or None

        cluster.wait(release, "re-planned pod pinned to the other node", timeout=90)
        [pod] = cluster.wait_pods(job, 1, phase="Running", timeout=90)
        assert pod["spec"]["nodeName"] == other
        print(f"node deletion: planned {planned}, deleted before binding, re-planned to {other}")


def test_two_replicas_one_leader_and_failover(cluster: E2ECluster, ns: Namespace) -> None:
    check = ns.unique("optsched")
    name = f"optsched.io/{check}"
    ns.apply(admission_check(check, name))
    common = [
        "--check-name",
        check,
        "--controller-name",
        name,
        *FAST,
        "--leader-elect",
        "--lease-namespace",
        ns.name,
        "--lease-name",
        "optsched-leader",
        "--lease-duration",
        "6",
    ]
    replicas = {
        who: ControllerProcess(cluster.kubeconfig, *common, "--identity", who).start() for who in "ab"
    }
    try:

        def holder() -> str | None:
            lease = cluster.get("coordination.k8s.io/v1", "Lease", "optsched-leader", ns.name)
            return ((lease or {}).get("spec") or {}).get("holderIdentity") or None

        leader = cluster.wait(holder, "a leader", timeout=60)
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=60)
        optsched_queue(ns, check)
        first = ns.apply_one(gpu_job("first", "lq", pods=1, gpus_per_pod=2))
        wl = cluster.wait_workload(first)
        wait_check_ready(cluster, ns, wl["metadata"]["name"], check, "first admitted")
        follower = "b" if leader == "a" else "a"
        assert "admitted" not in replicas[follower].log()
        replicas[leader].kill()
        started = time.monotonic()
        cluster.wait(lambda: holder() == follower or None, "the follower takes the Lease", timeout=60)
        takeover = time.monotonic() - started
        second = ns.apply_one(gpu_job("second", "lq", pods=1, gpus_per_pod=2))
        wl2 = cluster.wait_workload(second)
        wait_check_ready(cluster, ns, wl2["metadata"]["name"], check, "second admitted")
        assert "admitted" in replicas[follower].log()
        print(f"leader election: {leader} led, killed; {follower} took over in {takeover:.1f}s and admitted")
    finally:
        for proc in replicas.values():
            proc.stop()
