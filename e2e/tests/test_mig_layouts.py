"""MIG layouts planned against the queue and carried out by the controller, on the real control plane.

A simulated agent serves every fake GPU node. Two H100 GPUs of one node and
one A100 GPU of another are put in MIG mode with one whole-GPU instance each
(NVIDIA's ``all-7g`` config, what an operator sets up once; a simulated GPU is
in MIG mode while it has instances), so every slice the queue needs is a
reconfiguration. A queue of MIG requests then goes through Kueue: the
planner chooses each GPU's layout, the controller writes it to the node's
``NodeGPUs.spec.migLayout`` and holds the workloads Pending until the agent
reports ``Success`` and the node advertises the slices, then admits them.
Every pod must bind to a node that really has an instance of its profile for
it, and every layout written must be the one the GPU now reports. Then, with
the agent stopped, a change is written for a workload that is deleted before
the agent starts it: the controller drops it, putting the GPU's entry back.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.agent_helpers import NODE_GPUS_API, AgentProcess, running_agent
from e2e.optsched_helpers import check_state
from e2e.testing import (
    GPU,
    GPU_PRODUCT,
    H100,
    HOSTNAME_LABEL,
    KUEUE_API,
    E2ECluster,
    Namespace,
    cluster_queue,
    gpu_job,
    local_queue,
    resource_flavor,
)
from e2e.tests.test_controller import controller

A100 = "NVIDIA-A100-PCIE-40GB"
H100_NODE, A100_NODE = "h100-007", "a100-003"
MIG_MODE = {H100_NODE: ((0, 1), "7g.80gb"), A100_NODE: ((0,), "7g.40gb")}
"""GPUs put in MIG mode (one whole-GPU instance, idle) before the queue arrives."""
PROFILES = ("3g.40gb", "1g.10gb", "3g.20gb", "1g.5gb")
MIG = "nvidia.com/mig-"
RECORD = "optsched.io/mig-changes"


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    with running_agent(cluster, tmp_path_factory.mktemp("agent-state")) as proc:
        yield proc


def node_gpus(cluster: E2ECluster, node: str) -> dict[str, Any]:
    obj = cluster.get(NODE_GPUS_API, "NodeGPUs", node)
    assert obj is not None, f"no NodeGPUs for {node}"
    return obj


def _settled(cluster: E2ECluster, node: str) -> dict[str, Any] | None:
    """The NodeGPUs once the agent answered its current spec with Success."""
    obj = node_gpus(cluster, node)
    state = (obj.get("status") or {}).get("migLayout") or {}
    if state.get("observedGeneration") == obj["metadata"]["generation"] and state.get("state") == "Success":
        return obj
    return None


def _layouts(obj: dict[str, Any]) -> dict[int, list[tuple[str, int]]]:
    """GPU index -> its instances as the agent reports them (MIG-enabled GPUs only)."""
    out = {}
    for gpu in (obj.get("status") or {}).get("gpus") or []:
        mig = gpu.get("mig") or {}
        if mig.get("enabled"):
            out[gpu["index"]] = sorted((i["profile"], i["start"]) for i in mig.get("instances") or [])
    return out


def _mig_mode(cluster: E2ECluster, wanted: dict[str, tuple[tuple[int, ...], str]] = MIG_MODE) -> None:
    for node, (gpus, whole) in wanted.items():
        layout = [{"gpu": g, "instances": [{"profile": whole, "start": 0}]} for g in gpus]
        cluster.kube.patch(NODE_GPUS_API, "NodeGPUs", node, {"spec": {"migLayout": layout}})
    for node, (gpus, _) in wanted.items():
        settled = cluster.wait(lambda: _settled(cluster, node), f"MIG mode on {node}", timeout=60)  # noqa: B023
        assert set(gpus) <= set(_layouts(settled)), settled["status"]


def mig_queue(ns: Namespace, check: str) -> None:
    """A flavor, a ClusterQueue covering GPUs and MIG profiles, requiring ``check``; LocalQueue lq."""
    flavor, cq_name = ns.unique("mig"), ns.unique("cq")
    cq = cluster_queue(cq_name, flavor, 400, cpu="5000")
    group = cq["spec"]["resourceGroups"][0]
    group["coveredResources"] += [MIG + p for p in PROFILES]
    group["flavors"][0]["resources"] += [{"name": MIG + p, "nominalQuota": 100} for p in PROFILES]
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    ns.apply([resource_flavor(flavor), cq, local_queue("lq", cq_name)])
    ns.cluster.wait_condition(KUEUE_API, "ClusterQueue", cq_name, "Active")
    ns.cluster.wait_condition(KUEUE_API, "LocalQueue", "lq", "Active", namespace=ns.name)


def mig_job(name: str, profile: str, pods: int, product: str, node: str | None = None) -> dict[str, Any]:
    """An indexed Job of ``pods`` pods, each asking one ``profile`` slice on a ``product`` GPU."""
    selector = {GPU_PRODUCT: product, **({HOSTNAME_LABEL: node} if node else {})}
    job = gpu_job(name, "lq", pods=pods, node_selector=selector)
    container = job["spec"]["template"]["spec"]["containers"][0]
    limits = copy.deepcopy(container["resources"]["limits"])
    del limits[GPU]
    container["resources"]["limits"] = {**limits, MIG + profile: "1"}
    return job


def _profile(pod: dict[str, Any]) -> str:
    [profile] = [
        k.removeprefix(MIG)
        for c in pod["spec"]["containers"]
        for k in (c.get("resources") or {}).get("limits") or {}
        if k.startswith(MIG)
    ]
    return str(profile)


def test_a_queue_of_mig_requests_gets_its_layouts_applied_and_every_pod_a_slice_that_exists(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    _mig_mode(cluster)
    with controller(cluster, ns) as (_proc, check):
        mig_queue(ns, check)
        specs = [
            (mig_job("h100-three", "3g.40gb", 1, H100), 1),
            (mig_job("h100-ones", "1g.10gb", 4, H100), 4),
            (mig_job("a100-three", "3g.20gb", 1, A100), 1),
            (mig_job("a100-ones", "1g.5gb", 3, A100), 3),
        ]
        jobs = [(ns.apply_one(job), n) for job, n in specs]
        pods = [p for job, n in jobs for p in cluster.wait_pods(job, n, phase="Running", timeout=120)]
        for job, _ in jobs:
            workload = cluster.wait_workload(job)
            assert check_state(workload, check)["state"] == "Ready", job["metadata"]["name"]
    per_node = Counter((p["spec"]["nodeName"], _profile(p)) for p in pods)
    for (node, profile), count in sorted(per_node.items()):
        settled = cluster.wait(lambda: _settled(cluster, node), f"{node} settled", timeout=30)  # noqa: B023
        slices = sum(1 for layout in _layouts(settled).values() for p, _ in layout if p == profile)
        assert slices >= count, f"{count} pods of {profile} on {node}, which has {slices} such instances"
        allocatable = (cluster.get("v1", "Node", node) or {})["status"]["allocatable"]
        assert int(allocatable.get(MIG + profile, 0)) >= count, (node, profile, allocatable)
    written = set()
    for node in {n for n, _ in per_node}:
        obj = node_gpus(cluster, node)
        reported = _layouts(obj)
        for entry in obj["spec"]["migLayout"]:
            asked = sorted((i["profile"], i["start"]) for i in entry["instances"])
            assert reported.get(entry["gpu"]) == asked, (
                f"{node} GPU {entry['gpu']}: asked {asked}, has {reported}"
            )
        assert RECORD not in (obj["metadata"].get("annotations") or {}), "applied changes leave no record"
        written |= {e["involvedObject"]["name"] for e in _events(cluster, "MIGLayoutChangeWritten")}
    assert {n for n, _ in per_node} <= written, "the controller wrote the layouts the pods run on"


def _events(cluster: E2ECluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in cluster.list("v1", "Event", "default") if e.get("reason") == reason]


def _entry(cluster: E2ECluster, node: str, gpu: int) -> tuple[list[tuple[str, int]], bool]:
    """A GPU's ``spec.migLayout`` entry, and whether the controller's record is on the object."""
    obj = node_gpus(cluster, node)
    entries = {e["gpu"]: e["instances"] for e in (obj.get("spec") or {}).get("migLayout") or []}
    asked = sorted((i["profile"], i["start"]) for i in entries.get(gpu, []))
    return asked, RECORD in (obj["metadata"].get("annotations") or {})


def test_a_change_whose_workload_is_deleted_before_the_agent_starts_it_is_dropped(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node, whole = "h100-006", [("7g.80gb", 0)]
    _mig_mode(cluster, {node: ((0,), "7g.80gb")})
    agent.stop()  # nothing applies the change: it stays unstarted
    try:
        with controller(cluster, ns) as (_proc, check):
            mig_queue(ns, check)
            job = ns.apply_one(mig_job("gone", "3g.40gb", 1, H100, node=node))
            asked = cluster.wait(
                lambda: (lambda e: e if e[0] != whole and e[1] else None)(_entry(cluster, node, 0)),
                "the layout change written with its record",
                timeout=60,
            )
            assert ("3g.40gb", 0) in asked[0] or ("3g.40gb", 4) in asked[0], asked
            message = cluster.wait(
                lambda: (lambda m: m if "waits for the MIG layout" in m else None)(
                    str(check_state(cluster.workload_for(job), check).get("message", ""))
                ),
                "the workload held for the layout",
                timeout=30,
            )
            assert f"node {node} GPU 0" in message, message
            cluster.delete(job)
            restored = cluster.wait(
                lambda: (lambda e: e if e == (whole, False) else None)(_entry(cluster, node, 0)),
                "the change dropped: the entry back to the GPU's layout, the record gone",
                timeout=60,
            )
            assert restored == (whole, False)
            assert [
                e for e in _events(cluster, "MIGLayoutChangeDropped") if e["involvedObject"]["name"] == node
            ]
    finally:
        agent.start()
