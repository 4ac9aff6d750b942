"""Simulated node agents on the real control plane: what they publish, health, drift and MIG layouts.

One agent process serves the small profile's 20 fake GPU nodes (each labelled
with the shipped hardware profile it models). The planner then reads what
the agents published: UUIDs and islands, an unhealthy GPU nothing new lands
on, and the GPUs a pod really holds where the emulated device plugin chose
other ones than planned. MIG layouts are applied on idle simulated A100s;
a crash mid-apply is rolled back, an invalid layout refused with its reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.agent_helpers import NODE_GPUS_API, TOPOLOGY, AgentProcess, running_agent
from e2e.optsched_helpers import ROOT, check_state, optsched_queue, pod_gpus
from e2e.testing import GPU, HOSTNAME_LABEL, E2ECluster, Namespace, gpu_job
from e2e.tests.test_controller import controller
from optsched.agent.simulated import inject_xid
from optsched.snapshot.build import load_snapshot


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    with running_agent(cluster, tmp_path_factory.mktemp("agent-state")) as proc:
        yield proc


def node_gpus(cluster: E2ECluster, node: str) -> dict[str, Any]:
    obj = cluster.get(NODE_GPUS_API, "NodeGPUs", node)
    assert obj is not None, f"no NodeGPUs for {node}"
    return obj


def topology_of(cluster: E2ECluster, node: str) -> dict[str, Any]:
    obj = cluster.get("v1", "Node", node) or {}
    return dict(json.loads(obj["metadata"]["annotations"][TOPOLOGY]))


def events_for(
    cluster: E2ECluster, name: str, reason: str, namespace: str = "default"
) -> list[dict[str, Any]]:
    events = cluster.list("v1", "Event", namespace)
    return [e for e in events if e["involvedObject"].get("name") == name and e.get("reason") == reason]


def live_snapshot(cluster: E2ECluster, out: Path) -> Any:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "optsched",
            "snapshot",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--out",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return load_snapshot(out)


def test_agents_publish_node_gpus_and_the_annotation_the_planner_reads(
    cluster: E2ECluster, agent: AgentProcess, tmp_path: Path
) -> None:
    expected_islands = {
        "h100": [[0, 1, 2, 3, 4, 5, 6, 7]],
        "a100": [[0, 1], [2, 3], [4, 5], [6, 7]],
        "t4": [[0], [1], [2], [3]],
        "h200": [[0, 1, 2, 3, 4, 5, 6, 7]],
    }
    for node in cluster.gpu_nodes():
        name = node["metadata"]["name"]
        status = node_gpus(cluster, name)["status"]
        # GFD's count: DRA nodes have no nvidia.com/gpu capacity (their GPUs are in a ResourceSlice).
        assert len(status["gpus"]) == int(node["metadata"]["labels"]["nvidia.com/gpu.count"]), name
        assert status["backend"] == "simulated"
        assert status["nvlinkIslands"] == expected_islands[name.rsplit("-", 1)[0]], name
        annotation = topology_of(cluster, name)
        assert annotation["uuids"] == [g["uuid"] for g in status["gpus"]], name
        assert annotation["nvlinkIslands"] == status["nvlinkIslands"]
        owner = node_gpus(cluster, name)["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", name, node["metadata"]["uid"])
    snapshot = live_snapshot(cluster, tmp_path / "snap.yaml")
    h100 = next(n for n in snapshot.nodes if n.name == "h100-000")
    assert list(h100.gpu_uuids) == [g["uuid"] for g in node_gpus(cluster, "h100-000")["status"]["gpus"]]
    assert h100.nvlink_islands == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_an_injected_xid_makes_a_gpu_unhealthy_and_nothing_new_lands_on_it(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node = "h100-001"
    inject_xid(agent.state_dir / node, 3, 79, "GPU has fallen off the bus")
    inject_xid(agent.state_dir / node, 5, 13, "graphics engine exception (application)")

    def unhealthy() -> list[int] | None:
        gpus = node_gpus(cluster, node)["status"]["gpus"]
        bad = [g["index"] for g in gpus if g["health"]["state"] == "Unhealthy"]
        return bad or None

    assert cluster.wait(unhealthy, "GPU 3 unhealthy") == [3], "XID 13 is an application error: ignored"
    assert "79" in node_gpus(cluster, node)["status"]["gpus"][3]["health"]["reason"]
    cluster.wait(lambda: topology_of(cluster, node)["unhealthy"] == [3] or None, "annotation says unhealthy")
    assert cluster.wait(lambda: events_for(cluster, node, "GPUUnhealthy") or None, "a GPUUnhealthy Event")
    with controller(cluster, ns) as (_proc, check):
        optsched_queue(ns, check, node_labels={HOSTNAME_LABEL: node})
        seven = ns.apply_one(gpu_job("seven", "lq", gpus_per_pod=7))
        pods = cluster.wait_pods(seven, 1)
        assert sorted(pod_gpus(pods[0])) == [0, 1, 2, 4, 5, 6, 7]
        one = ns.apply_one(gpu_job("one-more", "lq", gpus_per_pod=1))
        cluster.wait(lambda: cluster.workload_for(one), "the second workload")
        time.sleep(8)
        wl = cluster.workload_for(one)
        assert wl is not None and check_state(wl, check).get("state") != "Ready", (
            "placed on the unhealthy GPU"
        )


def test_drift_between_the_plan_and_the_device_plugin_is_reported_and_counted(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace, tmp_path: Path
) -> None:
    node = "a100-000"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "drifted", "annotations": {"optsched.io/gpus": "1,2"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"limits": {GPU: "2", "cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }
    ns.apply_one(pod)

    def held() -> list[int] | None:
        for p in node_gpus(cluster, node)["status"].get("pods") or []:
            if p["name"] == "drifted":
                return list(p["containers"][0]["gpuIndices"])
        return None

    really = cluster.wait(held, "the emulated device plugin's choice")
    assert sorted(really) != [1, 2], "best-effort never splits two NVLink pairs on an idle bridged box"
    assert len(really) == 2
    cluster.wait(lambda: events_for(cluster, "drifted", "GPUDrift", ns.name) or None, "a GPUDrift Event")
    snapshot = live_snapshot(cluster, tmp_path / "snap.yaml")
    used = snapshot.usage_of(node).gpu_milli
    assert [i for i, milli in enumerate(used) if milli] == sorted(really), (
        "the plan counts the GPUs really held"
    )


def _mig_state(cluster: E2ECluster, node: str) -> dict[str, Any] | None:
    obj = node_gpus(cluster, node)
    state = (obj.get("status") or {}).get("migLayout")
    if (
        state
        and state.get("observedGeneration") == obj["metadata"]["generation"]
        and state["state"] in ("Success", "Failed")
    ):
        return dict(state)
    return None


def _want_layout(cluster: E2ECluster, node: str, layout: list[dict[str, Any]]) -> None:
    cluster.kube.patch(NODE_GPUS_API, "NodeGPUs", node, {"spec": {"migLayout": layout}})


def test_a_mig_layout_is_applied_and_its_slices_become_allocatable(
    cluster: E2ECluster, agent: AgentProcess, ns: Namespace
) -> None:
    node = "a100-001"
    _want_layout(
        cluster,
        node,
        [{"gpu": 0, "instances": [{"profile": "3g.20gb", "start": 0}, {"profile": "3g.20gb", "start": 4}]}],
    )
    state = cluster.wait(lambda: _mig_state(cluster, node), "the MIG layout applied")
    assert state["state"] == "Success", state
    capacity = cluster.wait(
        lambda: (
            (cluster.get("v1", "Node", node) or {})["status"]["capacity"].get("nvidia.com/mig-3g.20gb")
            and (cluster.get("v1", "Node", node) or {})["status"]["capacity"]
        ),
        "MIG slices advertised",
    )
    assert capacity["nvidia.com/mig-3g.20gb"] == "2" and capacity[GPU] == "7"
    gpu0 = node_gpus(cluster, node)["status"]["gpus"][0]["mig"]
    assert gpu0["enabled"] and [(i["profile"], i["start"]) for i in gpu0["instances"]] == [
        ("3g.20gb", 0),
        ("3g.20gb", 4),
    ]
    pod = ns.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "slice"},
            "spec": {
                "nodeSelector": {HOSTNAME_LABEL: node},
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "resources": {"limits": {"nvidia.com/mig-3g.20gb": "1", "cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
        }
    )
    cluster.wait(
        lambda: (
            (cluster.get("v1", "Pod", pod["metadata"]["name"], ns.name) or {}).get("spec", {}).get("nodeName")
        ),
        "the slice pod scheduled by kube-scheduler",
    )


def test_an_invalid_layout_is_refused_with_its_reason(cluster: E2ECluster, agent: AgentProcess) -> None:
    node = "a100-002"
    _want_layout(cluster, node, [{"gpu": 1, "instances": [{"profile": "3g.20gb", "start": 2}]}])
    state = cluster.wait(lambda: _mig_state(cluster, node), "the layout judged")
    assert state["state"] == "Failed" and "3g.20gb" in state["message"] and "start" in state["message"], state
    gpu1 = node_gpus(cluster, node)["status"]["gpus"][1]["mig"]
    assert gpu1["instances"] == [], "nothing was touched"
    assert cluster.wait(
        lambda: events_for(cluster, node, "MIGLayoutFailed") or None, "a MIGLayoutFailed Event"
    )


def test_a_crash_mid_apply_is_rolled_back_then_applied(cluster: E2ECluster, agent: AgentProcess) -> None:
    node = "a100-003"
    agent.stop()
    layout = [{"profile": "1g.5gb", "start": s} for s in (0, 1, 2, 3)] + [{"profile": "3g.20gb", "start": 4}]
    _want_layout(cluster, node, [{"gpu": 2, "instances": layout}])
    crashing = AgentProcess(agent.kubeconfig, agent.state_dir).start(
        "--simulate-crash-after-mig-creates", "2"
    )
    assert crashing.wait_exit(90) == 137, crashing.log()[-2000:]
    assert (agent.state_dir / node / "mig-journal.json").exists(), "the crash left its journal"
    agent.start()
    assert cluster.wait(lambda: events_for(cluster, node, "MIGLayoutRolledBack") or None, "rolled back")
    state = cluster.wait(lambda: _mig_state(cluster, node), "applied after the rollback")
    assert state["state"] == "Success", state
    assert not (agent.state_dir / node / "mig-journal.json").exists()
