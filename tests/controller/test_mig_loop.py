"""One controller cycle over a fake API server: a plan's layout change becomes a NodeGPUs patch."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from optsched.controller.loop import Controller
from optsched.controller.mig_decide import HOLD_PREFIX
from optsched.controller.options import Options
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from optsched.model.names import KUEUE_API, NODE_GPUS_API
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from tests.controller import objects as o
from tests.controller.test_mig_decide import admit, change, plan
from tests.kube.fake import FakeCluster, FakeTransport

WHOLE = (("7g.80gb", 0),)


def planner(snapshot: Snapshot) -> Plan:
    return plan(admit("w"), changes=(change(frm=WHOLE),))


def controller(objects: list[dict[str, Any]]) -> Controller:
    client = Client(FakeTransport(FakeCluster(objects, served=(KUEUE_API, NODE_GPUS_API))))
    return Controller(
        client,
        Options(dry_run=True),
        planner=planner,
        writer=Writer(client, dry_run=True),
        clock=lambda: datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
    )


def test_a_cycle_writes_the_layout_to_the_nodes_nodegpus_and_holds_the_workload() -> None:
    ngpu = o.mig_node_gpus("n1", {0: list(WHOLE)}, spec={0: list(WHOLE)}, state="Success")
    ctl = controller([*o.base_objects(o.node("n1", gpus=1)), o.workload("w", gpus=0), ngpu])
    result = asyncio.run(ctl.cycle())
    assert result.errors == ()
    [layout] = [w for w in ctl.writer.sent if w.target == "nodegpus/n1"]
    assert layout.verb == "merge-patch" and layout.body["metadata"]["resourceVersion"] == "5"
    assert layout.body["spec"]["migLayout"] == [{"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 4}]}]
    [check] = [w for w in ctl.writer.sent if w.target == "workloads/default/w"]
    entry = check.body["status"]["admissionChecks"][0]
    assert entry["state"] == "Pending" and entry["message"].startswith(HOLD_PREFIX + "node n1 GPU 0")
