from __future__ import annotations

from datetime import UTC, datetime, timedelta

from optsched.controller.decide import ActionKind, decide, pod_set_updates
from optsched.controller.inputs import build_input
from optsched.controller.options import DeferPolicy
from optsched.controller.records import PlacementRecord, record_from_decision
from optsched.model.names import PLAN_ID_LABEL, PODSET_LABEL, PRODUCT_LABEL
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.reasons import Reason, ReasonCode
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def admit(name: str, nodes: list[str], gpus: int = 4) -> WorkloadDecision:
    return WorkloadDecision(
        name=f"default/{name}",
        decision="admit",
        gpus=gpus * len(nodes),
        pod_sets=[
            PodSetPlacement(
                name="main",
                flavor="default",
                pods=[PodPlacement(index=i, node=n, gpus=list(range(gpus))) for i, n in enumerate(nodes)],
            )
        ],
    )


def defer(
    name: str, reason: str, code: ReasonCode = ReasonCode.INSUFFICIENT_CAPACITY, *more: Reason
) -> WorkloadDecision:
    return WorkloadDecision(
        name=f"default/{name}", decision="defer", reasons=[Reason(code=code, message=reason), *more]
    )


def plan_of(*decisions: WorkloadDecision) -> Plan:
    return Plan(status=PlanStatus.OPTIMAL, workloads=list(decisions))


DEFAULT_POLICY = DeferPolicy()


def run(objects, plan, *, now=NOW, policy=DEFAULT_POLICY, pods=()):
    inp = build_input(objects, ["optsched"], pods=pods)
    return decide(inp, plan, now=now, policy=policy)


def test_admitted_workload_gets_record_then_ready_check_with_plan_labels():
    objects = [*o.base_objects(o.node("n1")), o.workload("a", count=2, gpus=4)]
    out = run(objects, plan_of(admit("a", ["n1", "n1"])))
    [action] = out.actions
    assert action.kind == "admit"
    assert action.record is not None
    assert [s.node for s in action.record.slots("main")] == ["n1", "n1"]
    assert action.check is not None and action.check.state == "Ready"
    [update] = action.check.pod_set_updates
    assert update["labels"] == {PLAN_ID_LABEL: action.record.plan_id, PODSET_LABEL: "main"}
    assert update["nodeSelector"] == {PRODUCT_LABEL: o.H100}
    entry = action.check.entry()
    assert entry["name"] == "optsched" and entry["podSetUpdates"][0]["name"] == "main"


def test_record_already_written_is_not_written_again():
    decision = admit("a", ["n1"])
    record = record_from_decision("uid-a", decision)
    objects = [*o.base_objects(o.node("n1")), o.workload("a", record=record.to_annotation())]
    [action] = run(objects, plan_of(decision)).actions
    assert action.kind == "admit" and action.record is None and action.check is not None


def test_deferred_workload_keeps_pending_with_the_plans_reason():
    objects = [*o.base_objects(o.node("n1")), o.workload("a", gpus=8)]
    [action] = run(
        objects,
        plan_of(
            defer(
                "a",
                "needs 16 H100 GPUs in one rack; the fullest rack has 12 free",
                ReasonCode.TOPOLOGY_UNSATISFIABLE,
            )
        ),
    ).actions
    assert action.kind == "defer" and action.reason == "TopologyUnsatisfiable"
    assert action.check is not None and action.check.state == "Pending"
    assert "fullest rack has 12 free" in action.check.message
    assert action.check.last_transition_time == o.RESERVED_AT


def test_unchanged_deferral_message_is_not_rewritten():
    message = "optsched: waiting: no room"
    objects = [*o.base_objects(o.node("n1")), o.workload("a", message=message)]
    [action] = run(objects, plan_of(defer("a", "no room"))).actions
    assert action.check is None


def test_deferral_past_the_hold_time_releases_quota_with_retry():
    objects = [*o.base_objects(o.node("n1")), o.workload("a")]
    later = NOW + timedelta(seconds=400)
    [action] = run(
        objects,
        plan_of(defer("a", "no room")),
        now=later,
        policy=DeferPolicy(hold_seconds=300, retry_after_seconds=45),
    ).actions
    assert action.kind == "release"
    assert action.check is not None and action.check.state == "Retry"
    assert action.check.entry()["requeueAfterSeconds"] == 45


def test_workloads_without_our_check_are_ignored():
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("other", check_name="someone-else"),
        o.workload("nocheck", check=None),
    ]
    assert run(objects, plan_of(admit("other", ["n1"]), admit("nocheck", ["n1"]))).actions == ()


def test_stale_record_after_eviction_is_dropped():
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="n1", gpus=(0,)),)})
    objects = [*o.base_objects(o.node("n1")), o.workload("a", reserved=False, record=record.to_annotation())]
    [action] = run(objects, None).actions
    assert action.kind == "drop-record" and action.drop_record and action.check is None


def test_ready_workload_whose_node_vanished_before_binding_is_replanned():
    record = PlacementRecord(
        plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="gone", gpus=(0, 1, 2, 3)),)}
    )
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", check="Ready", admitted=True, record=record.to_annotation()),
    ]
    [action] = run(objects, None).actions
    assert action.kind == "replan"
    assert action.check is not None and action.check.state == "Retry"
    assert action.check.requeue_after_seconds == 0
    assert "gone" in action.check.message


def test_ready_workload_with_bound_pods_on_a_vanished_node_is_left_alone():
    record = PlacementRecord(
        plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="gone", gpus=None),)}
    )
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", check="Ready", admitted=True, record=record.to_annotation()),
    ]
    bound = o.pod("a-0", plan_id="p1", gated=False, node="gone", pinned_index=0, phase="Running")
    assert run(objects, None, pods=[bound]).actions == ()


def test_invalid_workload_with_our_check_gets_the_problem_as_message():
    broken = o.workload("bad")
    broken["spec"]["podSets"][0]["count"] = "many"
    objects = [*o.base_objects(o.node("n1")), broken]
    inp = build_input(objects, ["optsched"])
    [_report] = inp.reports
    out = decide(inp, None, now=NOW)
    [action] = out.actions
    assert action.check is not None and "count" in action.check.message


def test_product_selector_is_left_out_when_it_could_conflict():
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="n1"),)})
    wl = o.workload("a", node_selector={PRODUCT_LABEL: "something-else"})
    inp = build_input([*o.base_objects(o.node("n1")), wl], ["optsched"])
    workload = inp.workloads["default/a"].workload
    [update] = pod_set_updates(record, workload, {n.name: n for n in inp.snapshot.nodes}, {})
    assert "nodeSelector" not in update


def test_metrics_label_is_the_binding_reasons_code_whatever_its_words():
    objects = [*o.base_objects(o.node("n1")), o.workload("a", gpus=8)]
    capacity = Reason(code=ReasonCode.HIGHER_PRIORITY_FIRST, message="capacity taken by higher-priority work")
    quota = defer("a", "the GPUs of this rack are promised", ReasonCode.QUOTA_EXHAUSTED, capacity)
    [action] = run(objects, plan_of(quota)).actions
    assert action.reason == "QuotaExhausted"
    assert action.check is not None
    assert (
        "the GPUs of this rack are promised; capacity taken by higher-priority work" in action.check.message
    )
    [unplanned] = run(objects, plan_of()).actions
    assert unplanned.reason == "NotPlanned"


def test_a_release_is_an_event_and_a_metric_under_the_binding_reasons_code() -> None:
    objects = [*o.base_objects(o.node("n1")), o.workload("a")]
    later = NOW + timedelta(seconds=400)
    [action] = run(objects, plan_of(defer("a", "no room", ReasonCode.GPUS_FRAGMENTED)), now=later).actions
    assert action.kind is ActionKind.RELEASE and action.reason is ReasonCode.GPUS_FRAGMENTED
    assert action.event is not None and action.event.reason == "GPUsFragmented"
    assert (action.event.kind, action.event.namespace, action.event.name) == ("Workload", "default", "a")
    assert action.check is not None and action.event.message == action.check.message
    assert action.check.entry()["state"] == "Retry"


def test_a_replan_is_a_warning_event_and_a_deferral_is_none() -> None:
    record = PlacementRecord(
        plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="gone", gpus=(0,)),)}
    )
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", check="Ready", admitted=True, record=record.to_annotation()),
        o.workload("b"),
    ]
    replan, deferral = run(objects, plan_of(defer("b", "no room"))).actions
    assert replan.kind is ActionKind.REPLAN and replan.event is not None
    assert (replan.event.reason, replan.event.type) == ("PlannedNodeLost", "Warning")
    assert deferral.kind is ActionKind.DEFER and deferral.event is None


def test_when_planning_failed_no_check_is_touched_but_admitted_pods_are_pinned() -> None:
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="n1", gpus=(0,)),)})
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", check="Ready", admitted=True, record=record.to_annotation()),
        o.workload("b"),
    ]
    gated = o.pod("a-0", plan_id="p1", index=0)
    inp = build_input(objects, ["optsched"], pods=[gated])
    out = decide(inp, None, now=NOW, planned=False)
    assert out.actions == ()
    assert [(p.name, p.slot.node) for p in out.pins] == [("a-0", "n1")]


def test_reports_become_events_in_the_decision() -> None:
    objects = [*o.base_objects(o.node("n1"), o.node("bad", topology="[["))]
    inp = build_input(objects, ["optsched"])
    [event] = decide(inp, None, now=NOW, reports=inp.reports).events
    assert (event.kind, event.name, event.reason, event.type) == ("Node", "bad", "InvalidNode", "Warning")
