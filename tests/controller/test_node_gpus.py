"""The controller reads the node agents' NodeGPUs: GPUs pods really hold, health, malformed ones reported."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

from optsched import planning
from optsched.controller.loop import Controller
from optsched.controller.options import Options
from optsched.controller.watch import NodeGpusFilter
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from optsched.model.names import KUEUE_API, NODE_GPUS_API
from optsched.settings import Settings
from tests.controller import objects as o
from tests.kube.fake import FakeCluster, FakeTransport
from tests.snapshot.raw import holding, node_gpus

SETTINGS = Settings(time_limit_s=5, workers=1)


def controller(objects: list[dict[str, Any]]) -> Controller:
    """A controller reading a fake API server that serves the NodeGPUs CRD; it writes nothing."""
    client = Client(FakeTransport(FakeCluster(objects, served=(KUEUE_API, NODE_GPUS_API))))
    return Controller(
        client,
        Options(dry_run=True),
        planner=lambda snapshot: planning.plan(snapshot, SETTINGS, "optimizer"),
        writer=Writer(client, dry_run=True),
        is_leader=lambda: True,
        clock=lambda: datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
    )


def _running(name: str, gpus: int) -> dict[str, Any]:
    return o.pod(name, plan_id=None, gated=False, node="n1", phase="Running", gpus=gpus)


def test_the_plan_uses_the_gpus_pods_really_hold_and_skips_unhealthy_ones() -> None:
    agent = node_gpus("n1", unhealthy=(0,), pods=[holding("n1", "x", 4, 5, 6, 7, namespace="default")])
    objects = [*o.base_objects(o.node("n1")), agent, _running("x", 4), o.workload("a", gpus=3)]
    result = asyncio.run(controller(objects).cycle())
    assert result.errors == () and result.plan is not None
    [admitted] = result.plan.admitted
    assert admitted.pod_sets[0].pods[0].gpus == (1, 2, 3)


def test_a_malformed_node_gpus_is_reported_once_and_its_node_still_plans() -> None:
    agent = node_gpus("n1", unhealthy=(0,))
    agent["status"]["gpus"][0]["uuid"] = ["GPU-0"]
    agent["metadata"]["uid"] = "uid-ng-n1"
    ctl = controller([*o.base_objects(o.node("n1")), agent, o.workload("a", gpus=8)])
    result = asyncio.run(ctl.cycle())
    assert [a.key for a in result.decisions.of_kind("admit")] == ["default/a"]
    events = [w for w in ctl.writer.sent if w.target.startswith("events/")]
    [event] = events
    assert event.body["involvedObject"]["kind"] == "NodeGPUs"
    assert event.body["involvedObject"]["name"] == "n1"
    assert event.body["reason"] == "InvalidNodeGPUs"
    assert "field status.gpus[0].uuid" in event.body["message"]
    asyncio.run(ctl.cycle())
    assert len([w for w in ctl.writer.sent if w.target.startswith("events/")]) == 1


def test_node_gpus_heartbeats_do_not_trigger_cycles_but_health_and_held_devices_do() -> None:
    relevant = NodeGpusFilter()
    agent = node_gpus("n1")
    assert relevant({"type": "ADDED", "object": agent})
    beat = copy.deepcopy(agent)
    beat["status"]["heartbeat"] = "2026-12-01T13:00:30Z"
    beat["metadata"]["resourceVersion"] = "12"
    assert not relevant({"type": "MODIFIED", "object": beat})
    assert relevant({"type": "MODIFIED", "object": node_gpus("n1", unhealthy=(3,))})
    assert relevant(
        {"type": "MODIFIED", "object": node_gpus("n1", unhealthy=(3,), pods=[holding("n1", "p", 0)])}
    )
    assert relevant({"type": "DELETED", "object": agent})
    assert relevant({"type": "ADDED", "object": agent})
