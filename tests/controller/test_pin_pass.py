"""The pin pass between cycles follows the cycle's rules for pins, and gates are lifted through the loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from optsched.controller.pin_pass import pin_pass_decisions
from optsched.controller.records import PlacementRecord
from optsched.model.names import HOSTNAME_LABEL
from optsched.model.placement import PodPlacement
from tests.controller import objects as o
from tests.controller.test_loop import controller

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def _ready(node: str):
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node=node, gpus=(0,)),)})
    return record, o.workload("a", check="Ready", admitted=True, record=record.to_annotation())


def test_the_pin_pass_pins_to_the_nodes_hostname_label_and_stamps_the_pin():
    node = o.node("ip-10-0-0-1.ec2.internal")
    node["metadata"]["labels"][HOSTNAME_LABEL] = "ip-10-0-0-1"
    _, ready = _ready("ip-10-0-0-1.ec2.internal")
    found = pin_pass_decisions([node, ready], [o.pod("a-0", plan_id="p1")], ["optsched"], now=NOW)
    [pin] = found.pins
    patch = pin.patch()
    assert patch["spec"]["nodeSelector"] == {HOSTNAME_LABEL: "ip-10-0-0-1"}
    assert patch["metadata"]["annotations"]["optsched.io/pinned-at"] == "2026-01-01T00:05:00Z"


def test_the_pin_pass_pins_nothing_onto_a_node_that_is_gone_or_cordoned():
    _, ready = _ready("n1")
    cordoned = o.node("n1")
    cordoned["spec"] = {"unschedulable": True}
    for nodes in ([], [cordoned]):
        found = pin_pass_decisions([*nodes, ready], [o.pod("a-0", plan_id="p1")], ["optsched"], now=NOW)
        assert found.pins == ()


def test_the_cycle_lifts_our_gate_from_a_pod_of_a_queue_that_is_not_ours():
    objects = [
        *o.base_objects(o.node("n1")),
        o.cluster_queue("cpu", checks=()),
        o.local_queue("batch", cq="cpu"),
    ]
    pods = [o.pod("theirs", plan_id=None, queue="batch"), o.pod("ours", plan_id=None, queue="team")]
    ctl = controller(objects, pods)
    result = asyncio.run(ctl.cycle())
    assert [u.name for u in result.decisions.ungates] == ["theirs"]
    patches = [w for w in ctl.writer.sent if w.target.startswith("pods/")]
    assert [w.target for w in patches] == ["pods/default/theirs"]
    assert patches[0].body["spec"] == {"schedulingGates": None}
