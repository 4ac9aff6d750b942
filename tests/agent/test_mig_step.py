"""An agent pass changes a MIG GPU around the instances pods use, and waits when the change would take one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.agent.cycle import NodeAgent, NodeReport, NodeView
from optsched.agent.devices import Discovery
from optsched.agent.held import EmulatedHeld, HeldDevices
from optsched.agent.podresources import ContainerDevices, PodDevices
from optsched.agent.profile import resolve_profiles
from optsched.agent.serve import ServeOptions, simulated_backend
from optsched.agent.simulated_mig import mig_uuid

NODE = "n1"
HELD_SLICE = mig_uuid(NODE, 0, 0, "3g.40gb")
"""The 3g.40gb at start 0 of GPU 0, which a pod holds where the held source names its devices."""


@dataclass
class KnownHeld:
    """kubelet's PodResources as a test sets it: these pods hold these devices."""

    pods: Sequence[PodDevices]

    def held(
        self,
        pods: Sequence[Mapping[str, Any]],
        previous: Mapping[str, Any],
        discovery: Discovery,
        unhealthy: frozenset[int],
    ) -> list[PodDevices]:
        return list(self.pods)


def _agent(tmp_path: Path, held: HeldDevices, layout: Sequence[tuple[int, str, int]]) -> NodeAgent:
    (hardware,) = resolve_profiles("dgx-h100")
    options = ServeOptions(simulate=True, profiles=(hardware,), state_dir=tmp_path)
    backend = simulated_backend(hardware, NODE, options)
    for gpu, profile, start in layout:
        backend.mig.create(gpu, profile, start)
    return NodeAgent(NODE, backend, held, "simulated", tmp_path / NODE / "mig-journal.json", simulated=True)


def _slice_pod(name: str, profile: str) -> dict[str, Any]:
    limits = {f"nvidia.com/mig-{profile}": "1"}
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


def _holding(name: str, *uuids: str) -> PodDevices:
    return PodDevices("team", name, (ContainerDevices("main", (("nvidia.com/mig-3g.40gb", uuids),)),))


def _spec(*slots: tuple[str, int]) -> dict[str, Any]:
    return {"migLayout": [{"gpu": 0, "instances": [{"profile": p, "start": s} for p, s in slots]}]}


def _passes(agent: NodeAgent, spec: dict[str, Any], pods: tuple[dict[str, Any], ...]) -> list[NodeReport]:
    """Two passes: the first publishes its state, the second starts from it."""
    status: dict[str, Any] = {}
    reports = []
    for _ in range(2):
        view = NodeView({"metadata": {"name": NODE, "uid": "u-1"}}, _node_gpus(status, spec), pods)
        reports.append(agent.cycle(view))
        status = reports[-1].status
    return reports


def _node_gpus(status: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": NODE, "generation": 1}, "spec": spec, "status": status}


def _instances(report: NodeReport, gpu: int = 0) -> list[tuple[str, int, str]]:
    return [(i["profile"], i["start"], i["uuid"]) for i in report.status["gpus"][gpu]["mig"]["instances"]]


BEFORE = [(0, "3g.40gb", 0), (0, "3g.40gb", 4)]
AROUND = _spec(("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6))
"""Keeps the 3g.40gb at start 0, replaces the one at start 4."""


def test_a_change_keeping_the_instance_a_pod_holds_is_applied_around_it(tmp_path: Path) -> None:
    agent = _agent(tmp_path, KnownHeld([_holding("infer", HELD_SLICE)]), BEFORE)
    applying, done = _passes(agent, AROUND, (_slice_pod("infer", "3g.40gb"),))
    assert applying.status["migLayout"]["state"] == "Applying"
    assert done.status["migLayout"]["state"] == "Success", done.status["migLayout"]["message"]
    assert _instances(done) == [
        ("3g.40gb", 0, HELD_SLICE),
        ("2g.20gb", 4, mig_uuid(NODE, 0, 4, "2g.20gb")),
        ("1g.10gb", 6, mig_uuid(NODE, 0, 6, "1g.10gb")),
    ]
    assert done.status["pods"][0]["name"] == "infer"


def test_a_change_removing_the_instance_a_pod_holds_waits_and_names_it(tmp_path: Path) -> None:
    agent = _agent(tmp_path, KnownHeld([_holding("infer", HELD_SLICE)]), BEFORE)
    spec = _spec(("4g.40gb", 0), ("3g.40gb", 4))
    waiting, still = _passes(agent, spec, (_slice_pod("infer", "3g.40gb"),))
    for report in (waiting, still):
        state = report.status["migLayout"]
        assert state["state"] == "Pending"
        assert "GPU 0: the layout removes 3g.40gb at start 0, in use by team/infer" in state["message"]
    assert [(p, s) for p, s, _ in _instances(still)] == [("3g.40gb", 0), ("3g.40gb", 4)]


def test_a_slice_of_unknown_place_blocks_removing_any_instance_of_its_profile(tmp_path: Path) -> None:
    agent = _agent(tmp_path, EmulatedHeld(), BEFORE)
    waiting, _ = _passes(agent, AROUND, (_slice_pod("infer", "3g.40gb"),))
    state = waiting.status["migLayout"]
    assert state["state"] == "Pending"
    assert "removes 3g.40gb at start 4, in use by team/infer (asks for 3g.40gb" in state["message"]


def test_a_slice_of_unknown_place_lets_instances_of_other_profiles_change(tmp_path: Path) -> None:
    layout = [(0, "3g.40gb", 0), (0, "1g.10gb", 4), (0, "1g.10gb", 5), (1, "1g.10gb", 0)]
    agent = _agent(tmp_path, EmulatedHeld(), layout)
    _, done = _passes(agent, AROUND, (_slice_pod("infer", "3g.40gb"), _slice_pod("small", "2g.20gb")))
    assert done.status["migLayout"]["state"] == "Success", done.status["migLayout"]["message"]
    assert [(p, s) for p, s, _ in _instances(done)] == [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]
    assert [(p, s) for p, s, _ in _instances(done, 1)] == [("1g.10gb", 0)], "GPU 1 is not in the change"
