"""A Ready workload whose promise cannot be kept is sent back, never left with pods that never start."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from optsched.controller.decide import ActionKind, decide
from optsched.controller.inputs import build_input
from optsched.controller.records import record_from_decision
from optsched.model.names import HOSTNAME_LABEL, PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement
from optsched.model.plan import PodSetPlacement, WorkloadDecision
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def _record(nodes: list[str]):
    decision = WorkloadDecision(
        name="default/a",
        decision="admit",
        gpus=4 * len(nodes),
        pod_sets=[
            PodSetPlacement(
                name="main",
                flavor="default",
                pods=[PodPlacement(index=i, node=n, gpus=[0, 1, 2, 3]) for i, n in enumerate(nodes)],
            )
        ],
    )
    return record_from_decision("uid-a", decision)


def _actions(objects, pods=()):
    inp = build_input(objects, ["optsched"], pods=pods)
    return decide(inp, None, now=NOW)


def test_ready_written_after_an_eviction_is_reset_to_pending_and_holds_nothing():
    record = _record(["n1"])
    evicted = o.workload("a", check="Ready", reserved=False, record=record.to_annotation())
    inp = build_input([*o.base_objects(o.node("n1")), evicted], ["optsched"])
    assert inp.assumed == 0, "a workload without quota holds no GPUs"
    [action] = decide(inp, None, now=NOW).actions
    assert action.kind == ActionKind.RESET and action.drop_record
    assert action.check is not None and action.check.state == "Pending"


def test_ready_without_a_record_is_replanned():
    ready = o.workload("a", check="Ready", admitted=True)
    [action] = _actions([*o.base_objects(o.node("n1")), ready]).actions
    assert action.kind == ActionKind.REPLAN and action.check is not None
    assert action.check.state == "Retry" and "missing" in action.check.message


def test_a_running_workload_whose_record_is_lost_keeps_running():
    ready = o.workload("a", check="Ready", admitted=True, record="{oops", owner="job-a")
    running = o.pod("a-0", plan_id="whatever", gated=False, node="n1", owner="job-a", phase="Running")
    out = _actions([*o.base_objects(o.node("n1")), ready], [running])
    assert out.actions == ()


def test_re_plans_back_off_after_the_first():
    ready = o.workload("a", check="Ready", admitted=True)
    delays = []
    for count in (0, 1, 2):
        ready["status"]["admissionChecks"][0]["retryCount"] = count
        [action] = _actions([*o.base_objects(o.node("n1")), ready]).actions
        delays.append(action.check.requeue_after_seconds)
    assert delays == [0, 60, 120]


def test_no_pod_is_pinned_for_a_workload_sent_back_in_the_same_cycle():
    record = _record(["gone", "n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    pods = [o.pod("a-0", plan_id=record.plan_id), o.pod("a-1", plan_id=record.plan_id)]
    out = _actions([*o.base_objects(o.node("n1")), ready], pods)
    assert [a.kind for a in out.actions] == [ActionKind.REPLAN] and out.pins == ()


def test_time_unschedulable_counts_from_the_pin_not_from_creation_while_gated():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    objects = [*o.base_objects(o.node("n1")), ready]
    pod = o.pod(
        "a-0",
        plan_id=record.plan_id,
        gated=False,
        pinned_index=0,
        unschedulable_since="2026-01-01T00:00:00Z",
        annotations={"optsched.io/pinned-at": "2026-01-01T00:09:50Z"},
    )
    assert _actions(objects, [pod]).actions == ()


def test_a_pin_is_stamped_with_when_it_was_made():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    [pin] = _actions([*o.base_objects(o.node("n1")), ready], [o.pod("a-0", plan_id=record.plan_id)]).pins
    assert pin.patch()["metadata"]["annotations"]["optsched.io/pinned-at"] == "2026-01-01T00:10:00Z"


def test_ready_with_an_unreadable_or_altered_record_is_replanned():
    tampered = json.loads(_record(["n1"]).to_annotation())
    tampered["podSets"]["main"][0]["gpus"] = [4, 5, 6, 7]
    for annotation in ("{oops", json.dumps(tampered)):
        ready = o.workload("a", check="Ready", admitted=True, record=annotation)
        [action] = _actions([*o.base_objects(o.node("n1")), ready]).actions
        assert action.kind == ActionKind.REPLAN, annotation
        assert PLACEMENT_ANNOTATION in action.check.message


def test_a_record_with_fields_of_a_newer_version_is_read_with_the_fields_it_knows():
    newer = json.loads(_record(["n1"]).to_annotation())
    newer["priorityBand"] = "gold"
    newer["podSets"]["main"][0]["numaNode"] = 1
    ready = o.workload("a", check="Ready", admitted=True, record=json.dumps(newer))
    inp = build_input([*o.base_objects(o.node("n1")), ready], ["optsched"])
    assert inp.assumed == 1 and decide(inp, None, now=NOW).actions == ()


def test_a_cordoned_planned_node_sends_the_workload_back():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    cordoned = o.node("n1")
    cordoned["spec"] = {"unschedulable": True}
    [action] = _actions([*o.base_objects(cordoned), ready]).actions
    assert action.kind == ActionKind.REPLAN and "cordoned" in action.check.message


def test_a_node_whose_annotation_turned_malformed_is_not_treated_as_gone():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    broken = o.node("n1", topology='{"nvlinkIslands": [[0, 1, 2, 3, 4, 5, 6, 7, 8]]}')
    inp = build_input([*o.base_objects(broken), ready], ["optsched"])
    assert "n1" not in {n.name for n in inp.snapshot.nodes}
    assert decide(inp, None, now=NOW).actions == ()


def test_a_pinned_pod_unschedulable_for_too_long_sends_the_workload_back():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    objects = [*o.base_objects(o.node("n1")), ready]
    pinned = dict(plan_id=record.plan_id, gated=False, pinned_index=0)
    recent = o.pod("a-0", **pinned, unschedulable_since="2026-01-01T00:09:30Z")
    assert _actions(objects, [recent]).actions == ()
    stuck = o.pod("a-0", **pinned, unschedulable_since="2026-01-01T00:07:00Z")
    [action] = _actions(objects, [stuck]).actions
    assert action.kind == ActionKind.REPLAN and "default/a-0" in action.check.message


def test_pins_use_the_nodes_hostname_label_not_its_name():
    record = _record(["node-1.internal"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    node = o.node("node-1.internal")
    node["metadata"]["labels"][HOSTNAME_LABEL] = "node-1"
    out = _actions([*o.base_objects(node), ready], [o.pod("a-0", plan_id=record.plan_id)])
    [pin] = out.pins
    assert pin.patch()["spec"]["nodeSelector"] == {HOSTNAME_LABEL: "node-1"}


def test_a_bound_pod_whose_request_cannot_be_read_hides_no_capacity_and_is_reported():
    weird = o.pod("weird", plan_id=None, gated=False, node="n1", gpus=8, phase="Running", namespace="other")
    weird["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpucores"] = "0"
    objects = [*o.base_objects(o.node("n1"), o.node("n2")), weird, o.workload("a", gpus=8)]
    inp = build_input(objects, ["optsched"])
    assert [n.name for n in inp.snapshot.nodes] == ["n2"], "its node is not planned on while it runs"
    [report] = [r for r in inp.reports if r.kind == "Pod"]
    assert report.name == "weird" and "gpucores" in report.message
    assert inp.nodes["n1"].ready, "the node itself is still there for the rules about pins"


def test_a_slot_whose_claim_is_allocated_elsewhere_is_replanned_at_once():
    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    inp = build_input([*o.base_objects(o.node("n1")), ready], ["optsched"])
    assert decide(inp, None, now=NOW).actions == ()
    why = {("default", record.plan_id): "ResourceClaim default/optsched-x-0 is allocated to other devices"}
    [action] = decide(inp, None, now=NOW, claim_conflicts=why).actions
    assert action.kind == ActionKind.REPLAN and action.check is not None
    assert action.check.state == "Retry" and "allocated to other devices" in action.check.message
    assert action.event is not None and action.event.reason == "ClaimUnenforceable"


class _Writer:
    client = None

    async def set_annotation(self, *args: object, **kw: object) -> str:
        return "2"

    async def apply_check(self, *args: object, **kw: object) -> None:
        return None

    async def event(self, *args: object, **kw: object) -> None:
        return None


def test_a_claim_conflict_is_forgotten_once_its_retry_is_sent_so_a_replan_is_judged_afresh():
    import asyncio  # local: only this test runs an actor

    from optsched.controller.act import Actor
    from optsched.controller.metrics import Metrics
    from optsched.controller.options import Options

    record = _record(["n1"])
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation())
    inp = build_input([*o.base_objects(o.node("n1")), ready], ["optsched"])
    actor = Actor(_Writer(), Metrics(), Options(), is_leader=lambda: True, clock=lambda: NOW)  # type: ignore[arg-type]
    actor.claims.conflicts[("default", record.plan_id)] = "ResourceClaim default/optsched-x-0 is taken"
    decisions = decide(inp, None, now=NOW, claim_conflicts=actor.claims.conflicts)
    assert [a.settles for a in decisions.actions] == [("default", record.plan_id)]
    asyncio.run(actor.act(decisions))
    assert actor.claims.conflicts == {}
    assert decide(inp, None, now=NOW, claim_conflicts=actor.claims.conflicts).actions == ()
