from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx

from optsched import planning
from optsched.controller.loop import Controller
from optsched.controller.options import Options
from optsched.controller.records import record_of
from optsched.controller.watch import NodeFilter, pod_frees_capacity, pod_is_gated
from optsched.errors import PlanValidationError
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from optsched.model.names import PLACEMENT_ANNOTATION, PLAN_ID_LABEL
from optsched.settings import Settings
from tests.controller import objects as o
from tests.kube.fake import FakeCluster, FakeTransport, status

SETTINGS = Settings(time_limit_s=5, workers=1)


def optimizer(snapshot):
    return planning.plan(snapshot, SETTINGS, "optimizer")


def controller(objects, pods=(), *, planner=optimizer, leader=True):
    """A controller reading a fake API server that holds ``objects`` and ``pods``; it writes nothing."""
    client = Client(FakeTransport(FakeCluster([*objects, *pods])))
    return Controller(
        client,
        Options(dry_run=True),
        planner=planner,
        writer=Writer(client, dry_run=True),
        is_leader=lambda: leader,
        clock=lambda: datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
    )


def test_cycle_writes_the_record_before_the_ready_check_and_admits_what_fits():
    objects = [
        *o.base_objects(o.node("n1"), o.node("n2")),
        o.workload("a", count=2, gpus=8),
        o.workload("b", count=1, gpus=8),
    ]
    ctl = controller(objects)
    result = asyncio.run(ctl.cycle())
    assert result.errors == ()
    verbs = [(w.verb, w.target) for w in ctl.writer.sent]
    assert verbs[0] == ("merge-patch", "workloads/default/a")
    assert verbs[1] == ("apply-status", "workloads/default/a")
    admitted = [a.key for a in result.decisions.of_kind("admit")]
    deferred = [a.key for a in result.decisions.of_kind("defer")]
    assert admitted == ["default/a"] and deferred == ["default/b"]
    entry = ctl.writer.sent[1].body["status"]["admissionChecks"][0]
    assert entry["state"] == "Ready"
    record = record_of(
        {
            "metadata": {
                "annotations": {
                    PLACEMENT_ANNOTATION: ctl.writer.sent[0].body["metadata"]["annotations"][
                        PLACEMENT_ANNOTATION
                    ]
                }
            }
        }
    )
    assert record is not None and {s.node for s in record.slots("main")} == {"n1", "n2"}
    assert entry["podSetUpdates"][0]["labels"][PLAN_ID_LABEL] == record.plan_id
    defer_entry = ctl.writer.sent[2].body["status"]["admissionChecks"][0]
    assert defer_entry["state"] == "Pending" and defer_entry["message"].startswith("optsched: waiting:")


def test_next_cycle_does_not_double_book_what_was_admitted():
    first = [*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=8)]
    ctl = controller(first)
    asyncio.run(ctl.cycle())
    annotation = ctl.writer.sent[0].body["metadata"]["annotations"][PLACEMENT_ANNOTATION]
    second = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=1, gpus=8, check="Ready", record=annotation),
        o.workload("b", count=1, gpus=8),
    ]
    result = asyncio.run(controller(second).cycle())
    assert [a.key for a in result.decisions.of_kind("defer")] == ["default/b"]
    assert result.decisions.of_kind("admit") == []


def admit_first(count: int = 2, gpus: int = 4) -> tuple[str, str]:
    """Run one cycle that admits workload ``a``; its placement record and plan id as written."""
    ctl = controller([*o.base_objects(o.node("n1")), o.workload("a", count=count, gpus=gpus)])
    asyncio.run(ctl.cycle())
    annotation = ctl.writer.sent[0].body["metadata"]["annotations"][PLACEMENT_ANNOTATION]
    plan_id = record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: annotation}}}).plan_id
    assert plan_id
    return annotation, plan_id


def test_gated_pods_of_ready_workloads_are_pinned_in_the_cycle():
    annotation, plan_id = admit_first()
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=2, gpus=4, check="Ready", admitted=True, record=annotation),
    ]
    pods = [o.pod("a-0", plan_id=plan_id, index=0), o.pod("a-1", plan_id=plan_id, index=1)]
    again = controller(objects, pods)
    assert asyncio.run(again.cycle()).pinned == 1, "one pod at a time on a device-plugin node"
    [first] = again.writer.sent
    assert first.target == "pods/default/a-0"
    assert first.body["metadata"]["annotations"]["optsched.io/gpus"] == "0,1,2,3"
    bound = o.pod("a-0", plan_id=plan_id, gated=False, pinned_index=0, node="n1")
    after = controller(objects, [bound, pods[1]])
    assert asyncio.run(after.cycle()).pinned == 1
    [second] = after.writer.sent
    assert second.target == "pods/default/a-1"
    assert second.body["metadata"]["annotations"]["optsched.io/gpus"] == "4,5,6,7"


def test_a_follower_plans_but_writes_nothing():
    objects = [*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=8)]
    ctl = controller(objects, leader=False)
    result = asyncio.run(ctl.cycle())
    assert result.decisions.of_kind("admit") and ctl.writer.sent == []


def test_an_invalid_plan_is_never_applied():
    def broken(snapshot):
        raise PlanValidationError(["GPU 0 of n1 given twice"])

    objects = [*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=8)]
    ctl = controller(objects, planner=broken)
    result = asyncio.run(ctl.cycle())
    assert ctl.writer.sent == [] and result.errors and "validate" in result.errors[0]


def test_malformed_node_is_reported_and_the_rest_still_admits():
    objects = [*o.base_objects(o.node("n1"), o.node("bad", topology="[[")), o.workload("a", count=1, gpus=8)]
    ctl = controller(objects)
    result = asyncio.run(ctl.cycle())
    assert result.reports == 1
    events = [w for w in ctl.writer.sent if w.verb == "create" and w.target.startswith("events/")]
    assert len(events) == 1 and events[0].body["involvedObject"]["name"] == "bad"
    assert [a.key for a in result.decisions.of_kind("admit")] == ["default/a"]
    asyncio.run(ctl.cycle())
    assert len([w for w in ctl.writer.sent if w.target.startswith("events/")]) == 1


def test_node_heartbeats_do_not_trigger_cycles_but_readiness_and_deletion_do():
    relevant = NodeFilter()
    node = o.node("n1")
    assert relevant({"type": "ADDED", "object": node})
    heartbeat = {**node, "metadata": {**node["metadata"], "resourceVersion": "99"}}
    assert not relevant({"type": "MODIFIED", "object": heartbeat})
    assert relevant({"type": "MODIFIED", "object": o.node("n1", ready=False)})
    assert relevant({"type": "DELETED", "object": node})


def test_pod_events_route_to_pinning_or_replanning():
    gated = o.pod("a", plan_id="p1")
    running = o.pod("b", plan_id="p1", gated=False, node="n1", phase="Running")
    done = o.pod("c", plan_id="p1", gated=False, node="n1", phase="Succeeded")
    assert pod_is_gated({"type": "ADDED", "object": gated})
    assert not pod_is_gated({"type": "MODIFIED", "object": running})
    assert not pod_frees_capacity({"type": "MODIFIED", "object": running})
    assert pod_frees_capacity({"type": "MODIFIED", "object": done})
    assert pod_frees_capacity({"type": "DELETED", "object": running})


def test_an_unchanged_cluster_is_not_solved_again():
    calls = []

    def counting(snapshot):
        calls.append(1)
        return optimizer(snapshot)

    objects = [*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=16)]
    ctl = controller(objects, planner=counting)
    first = asyncio.run(ctl.cycle())
    second = asyncio.run(ctl.cycle())
    assert len(calls) == 1
    assert first.plan is second.plan
    assert [a.kind for a in second.decisions.actions] == ["defer"]


def test_a_cycle_runs_five_timed_phases_and_only_the_last_one_writes():
    annotation, plan_id = admit_first()
    objects = [
        *o.base_objects(o.node("n1"), o.node("n2")),
        o.workload("a", count=2, gpus=4, check="Ready", admitted=True, record=annotation),
        o.workload("b", count=1, gpus=4),
    ]
    pods = [o.pod("a-0", plan_id=plan_id, index=0), o.pod("a-1", plan_id=plan_id, index=1)]
    again = controller(objects, pods)
    result = asyncio.run(again.cycle())
    assert [phase for phase, _ in result.phases] == ["read", "build-input", "plan", "decide", "act"]
    assert all(seconds >= 0 for _, seconds in result.phases)
    # Both pods of a are planned on device-plugin node n1: one gets its GPUs before the other is pinned.
    assert result.plan is not None and [p.name for p in result.decisions.pins] == ["a-0"]
    assert any(w.startswith("default/a-1: waits for default/a-0") for w in result.decisions.waiting)
    targets = [w.target for w in again.writer.sent]
    assert targets == ["pods/default/a-0", "workloads/default/b", "workloads/default/b"]
    ready = again.writer.sent[2].body["status"]["admissionChecks"][0]
    assert ready["state"] == "Ready" and ready["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    samples = again.metrics.registry.get_sample_value(
        "optsched_cycle_phase_duration_seconds_count", {"phase": "plan"}
    )
    assert samples == 1


def test_pods_are_still_pinned_when_planning_fails():
    def broken(snapshot):
        raise PlanValidationError(["GPU 0 of n1 given twice"])

    record = '{"planId":"p1","podSets":{"main":[{"index":0,"node":"n1","gpus":[0,1,2,3]}]},"flavors":{}}'
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=1, gpus=4, check="Ready", admitted=True, record=record),
        o.workload("b", count=1, gpus=4),
    ]
    ctl = controller(objects, [o.pod("a-0", plan_id="p1", index=0)], planner=broken)
    result = asyncio.run(ctl.cycle())
    assert "validate" in result.errors[0] and result.decisions.actions == ()
    assert [w.target for w in ctl.writer.sent] == ["pods/default/a-0"] and result.pinned == 1


def test_a_pod_that_changed_while_pinning_is_pinned_again_by_a_pin_pass():
    record = '{"planId":"p1","podSets":{"main":[{"index":0,"node":"n1","gpus":[0,1,2,3]}]},"flavors":{}}'
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=1, gpus=4, check="Ready", admitted=True, record=record),
        o.pod("a-0", plan_id="p1", index=0),
    ]
    client = Client(FakeTransport(FakeCluster(objects, write=lambda r: status(409, "modified"))))
    ctl = Controller(client, Options(), planner=optimizer, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    result = asyncio.run(ctl.cycle())
    assert result.pinned == 0 and result.errors == ()
    assert ctl.pin_trigger.is_set() and not ctl.trigger.is_set()


def test_a_cluster_that_cannot_be_read_skips_the_cycle():
    def refuse(request):
        raise httpx.ConnectError("connection refused")

    ctl = Controller(Client(FakeTransport(refuse)), Options(), planner=optimizer)
    result = asyncio.run(ctl.cycle())
    assert result.errors and result.errors[0].startswith("read: ")
    assert [phase for phase, _ in result.phases] == ["read"]


def test_a_workload_kueue_cannot_admit_is_kept_waiting_in_kueues_words_never_admitted():
    paused = o.local_queue("paused")
    paused["spec"]["stopPolicy"] = "Hold"
    held = o.workload("held")
    held["spec"]["queueName"] = "paused"
    ctl = controller([*o.base_objects(o.node("n1")), paused, held])
    result = asyncio.run(ctl.cycle())
    assert result.errors == () and result.decisions.of_kind("admit") == []
    [action] = result.decisions.of_kind("defer")
    assert action.key == "default/held" and action.check is not None
    assert action.check.state == "Pending"
    assert action.check.message == "optsched: waiting: LocalQueue paused is stopped (spec.stopPolicy Hold)"
