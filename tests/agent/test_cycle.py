"""One agent pass on simulated nodes: what gets published, health, drift and the MIG states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optsched.agent.cycle import NodeAgent, NodeView
from optsched.agent.held import EmulatedHeld
from optsched.agent.mig_step import MAX_INTERRUPTIONS, mig_step
from optsched.agent.profile import resolve_profiles
from optsched.agent.serve import ServeOptions, simulated_backend
from optsched.agent.simulated import inject_xid


def agent_for(profile: str, tmp_path: Path, node: str = "n1") -> NodeAgent:
    (hardware,) = resolve_profiles(profile)
    options = ServeOptions(simulate=True, profiles=(hardware,), state_dir=tmp_path)
    return NodeAgent(
        node=node,
        backend=simulated_backend(hardware, node, options),
        held_source=EmulatedHeld(),
        backend_name="simulated",
        journal=tmp_path / node / "mig-journal.json",
        simulated=True,
    )


def node(name: str = "n1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": "u-1", "labels": labels or {}}}


def gpu_pod(name: str, gpus: int, planned: str | None = None) -> dict[str, Any]:
    annotations = {"optsched.io/gpus": planned} if planned else {}
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }


def with_status(
    status: dict[str, Any], spec: dict[str, Any] | None = None, generation: int = 1
) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "generation": generation}, "spec": spec or {}, "status": status}


def test_a_switch_board_publishes_one_island_numa_uuids_and_gfd_labels(tmp_path: Path) -> None:
    report = agent_for("dgx-h100", tmp_path).cycle(NodeView(node(), None))
    value = json.loads(report.annotation)
    assert value["nvlinkIslands"] == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert value["numa"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert value["unhealthy"] == []
    assert len(set(value["uuids"])) == 8 and all(u.startswith("GPU-") for u in value["uuids"])
    assert [g["uuid"] for g in report.status["gpus"]] == value["uuids"]
    assert {g["island"] for g in report.status["gpus"]} == {0}
    assert report.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert report.labels["nvidia.com/gpu.count"] == "8"


def test_where_gfd_labels_the_node_the_agent_writes_no_labels(tmp_path: Path) -> None:
    labelled = node(labels={"nvidia.com/gfd.timestamp": "1764547200"})
    assert agent_for("dgx-h100", tmp_path).cycle(NodeView(labelled, None)).labels == {}


def test_a_critical_xid_marks_the_gpu_unhealthy_once_and_application_xids_are_ignored(tmp_path: Path) -> None:
    agent = agent_for("dgx-h100", tmp_path)
    inject_xid(tmp_path / "n1", 2, 79)
    inject_xid(tmp_path / "n1", 4, 13)
    first = agent.cycle(NodeView(node(), None))
    assert json.loads(first.annotation)["unhealthy"] == [2]
    assert first.status["gpus"][2]["health"]["state"] == "Unhealthy"
    assert "79" in first.status["gpus"][2]["health"]["reason"]
    assert [e.reason for e in first.events] == ["GPUUnhealthy"]
    second = agent.cycle(NodeView(node(), None))
    assert second.unhealthy == (2,) and second.events == ()


def test_a_restarted_agent_keeps_gpus_it_published_unhealthy(tmp_path: Path) -> None:
    first = agent_for("dgx-h100", tmp_path)
    inject_xid(tmp_path / "n1", 6, 48)
    published = first.cycle(NodeView(node(), None)).status
    restarted = agent_for("dgx-h100", tmp_path)
    report = restarted.cycle(NodeView(node(), with_status(published)))
    assert report.unhealthy == (6,)
    assert report.events == (), "not news: it was unhealthy before the restart"


def test_a_pod_the_device_plugin_put_elsewhere_than_planned_is_drift_reported_once(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    pods = (gpu_pod("p", 2, planned="1,2"),)
    report = agent.cycle(NodeView(node(), None, pods))
    (held,) = report.status["pods"]
    really = held["containers"][0]["gpuIndices"]
    assert sorted(really) in ([0, 1], [2, 3], [4, 5], [6, 7]), "best-effort keeps the pair on one bridge"
    assert [(d.name, d.planned, d.held) for d in report.drift] == [("p", (1, 2), tuple(sorted(really)))]
    assert [e.reason for e in report.events] == ["GPUDrift"]
    again = agent.cycle(NodeView(node(), with_status(report.status), pods))
    assert len(again.drift) == 1 and again.events == (), "kept as drift, reported once"
    assert again.status["pods"] == report.status["pods"], "kubelet never moves devices"


def test_a_mig_layout_goes_applying_then_success_and_changes_the_advertised_slices(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    spec = {
        "migLayout": [
            {"gpu": 0, "instances": [{"profile": "3g.20gb", "start": 0}, {"profile": "3g.20gb", "start": 4}]}
        ]
    }
    first = agent.cycle(NodeView(node(), with_status({}, spec)))
    assert first.mig is not None and first.mig.status is not None
    assert first.mig.status.state == "Applying"
    assert first.status["gpus"][0]["mig"]["instances"] == [], "the change waits for the next pass"
    second = agent.cycle(NodeView(node(), with_status(first.status, spec)))
    assert second.status["migLayout"]["state"] == "Success"
    assert [e.reason for e in second.events] == ["MIGLayoutApplied"]
    mig = second.status["gpus"][0]["mig"]
    assert mig["enabled"] and [(i["profile"], i["start"]) for i in mig["instances"]] == [
        ("3g.20gb", 0),
        ("3g.20gb", 4),
    ]
    assert second.resources is not None
    capacity, allocatable = second.resources
    assert capacity["nvidia.com/mig-3g.20gb"] == "2" and capacity["nvidia.com/gpu"] == "7"
    assert allocatable["nvidia.com/gpu"] == "7"
    third = agent.cycle(NodeView(node(), with_status(second.status, spec)))
    assert third.status["migLayout"]["state"] == "Success" and third.events == ()


def test_a_mig_change_waits_while_a_pod_holds_the_gpu(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    pods = (gpu_pod("busy", 8),)
    spec = {"migLayout": [{"gpu": 3, "instances": [{"profile": "7g.40gb", "start": 0}]}]}
    report = agent.cycle(NodeView(node(), with_status({}, spec), pods))
    assert report.status["migLayout"]["state"] == "Pending"
    assert "team/busy" in report.status["migLayout"]["message"]


def test_an_invalid_layout_fails_at_once_with_its_reason_and_is_not_retried_until_the_spec_changes(
    tmp_path: Path,
) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    spec = {"migLayout": [{"gpu": 1, "instances": [{"profile": "3g.20gb", "start": 2}]}]}
    failed = agent.cycle(NodeView(node(), with_status({}, spec)))
    state = failed.status["migLayout"]
    assert state["state"] == "Failed" and "3g.20gb" in state["message"]
    assert [e.reason for e in failed.events] == ["MIGLayoutFailed"]
    again = agent.cycle(NodeView(node(), with_status(failed.status, spec)))
    assert again.status["migLayout"] == state and again.events == ()
    assert again.status["gpus"][1]["mig"]["instances"] == []


def test_a_malformed_mig_spec_fails_naming_the_field(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    spec = {"migLayout": [{"gpu": 99, "instances": []}]}
    report = agent.cycle(NodeView(node(), with_status({}, spec)))
    assert report.status["migLayout"]["state"] == "Failed"
    assert "spec.migLayout[0].gpu" in report.status["migLayout"]["message"]


def test_a_gpu_without_mig_refuses_a_layout(tmp_path: Path) -> None:
    agent = agent_for("t4", tmp_path)
    spec = {"migLayout": [{"gpu": 0, "instances": [{"profile": "1g.5gb", "start": 0}]}]}
    failed = agent.cycle(NodeView(node(), with_status({}, spec)))
    assert failed.status["migLayout"]["state"] == "Failed"
    assert "does not support MIG" in failed.status["migLayout"]["message"]


def slice_pod(name: str, profile: str) -> dict[str, Any]:
    limits = {f"nvidia.com/mig-{profile}": "1"}
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


def test_a_pod_using_a_mig_slice_keeps_that_gpus_layout_until_it_leaves(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    first = {"migLayout": [{"gpu": 0, "instances": [{"profile": "7g.40gb", "start": 0}]}]}
    applying = agent.cycle(NodeView(node(), with_status({}, first)))
    done = agent.cycle(NodeView(node(), with_status(applying.status, first)))
    assert done.status["migLayout"]["state"] == "Success"
    second = {"migLayout": [{"gpu": 0, "instances": [{"profile": "3g.20gb", "start": 0}]}]}
    pods = (slice_pod("infer", "7g.40gb"),)
    waiting = agent.cycle(NodeView(node(), with_status(done.status, second, generation=2), pods))
    assert waiting.status["migLayout"]["state"] == "Pending"
    assert "team/infer" in waiting.status["migLayout"]["message"]
    assert waiting.status["gpus"][0]["mig"]["instances"][0]["profile"] == "7g.40gb"


def test_an_apply_interrupted_again_and_again_ends_failed(tmp_path: Path) -> None:
    agent = agent_for("a100-pcie-bridged", tmp_path)
    spec = {"migLayout": [{"gpu": 0, "instances": [{"profile": "7g.40gb", "start": 0}]}]}
    view = NodeView(node(), with_status({"migLayout": {"state": "Applying", "observedGeneration": 1}}, spec))
    discovery = agent.backend.discover()
    states = [mig_step(agent, view, discovery, [], rolled_back=True) for _ in range(MAX_INTERRUPTIONS)]
    assert [s.status.state for s in states if s.status] == ["Success"] * (MAX_INTERRUPTIONS - 1) + ["Failed"]
