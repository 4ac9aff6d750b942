"""What is planned, and how a waiting workload is answered: reserved counts, backoff, rejection."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from optsched.controller.decide import ActionKind, decide
from optsched.controller.inputs import build_input
from optsched.controller.options import DeferPolicy
from optsched.model.plan import Plan, PlanStatus, WorkloadDecision
from optsched.model.reasons import Reason, ReasonCode
from tests.controller import objects as o
from tests.controller.test_loop import controller

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
LATER = NOW + timedelta(seconds=DeferPolicy.hold_seconds + 60)


def _partial(name: str, *, spec_count: int, min_count: int, reserved: int):
    w = o.workload(name, count=reserved, gpus=8)
    w["spec"]["podSets"][0]["count"] = spec_count
    w["spec"]["podSets"][0]["minCount"] = min_count
    return w


def test_a_partially_admitted_workload_is_planned_at_exactly_its_reserved_count():
    nodes = [o.node(f"n{i}") for i in range(8)]
    inp = build_input(
        [*o.base_objects(*nodes), _partial("a", spec_count=8, min_count=2, reserved=4)], ["optsched"]
    )
    [workload] = inp.snapshot.workloads
    [pod_set] = workload.pod_sets
    assert (pod_set.count, pod_set.needed) == (4, 4)


def test_the_loop_places_exactly_the_reserved_count_when_more_would_fit():
    nodes = [o.node(f"n{i}") for i in range(8)]
    ctl = controller([*o.base_objects(*nodes), _partial("a", spec_count=8, min_count=2, reserved=4)])
    result = asyncio.run(ctl.cycle())
    [admit] = result.decisions.of_kind("admit")
    assert admit.record is not None and len(admit.record.slots("main")) == 4


def test_a_workload_kueue_has_not_reserved_is_never_planned_and_cannot_push_a_reserved_one_out():
    phantom = o.workload("phantom", gpus=8, reserved=False)
    phantom["spec"]["priority"] = 1000
    real = o.workload("real", gpus=8)
    inp = build_input([*o.base_objects(o.node("n1")), phantom, real], ["optsched"])
    assert [w.name for w in inp.snapshot.workloads] == ["real"]
    ctl = controller([*o.base_objects(o.node("n1")), phantom, real])
    result = asyncio.run(ctl.cycle())
    assert [a.key for a in result.decisions.of_kind("admit")] == ["default/real"]


def _deferred(reason: Reason, *nodes, **workload):
    w = o.workload("a", gpus=8, **workload)
    inp = build_input([*o.base_objects(*(nodes or [o.node("n1")])), w], ["optsched"])
    plan = Plan(
        status=PlanStatus.OPTIMAL,
        workloads=[WorkloadDecision(name="default/a", decision="defer", reasons=[reason])],
    )
    [action] = decide(inp, plan, now=LATER).actions
    return action


def _with_retry_count(count: int):
    w = o.workload("a", gpus=8)
    w["status"]["admissionChecks"][0]["retryCount"] = count
    return w


def test_retry_backs_off_exponentially_with_kueues_retry_count_of_our_check():
    busy = Reason(code=ReasonCode.INSUFFICIENT_CAPACITY, message="busy")
    plan = Plan(
        status=PlanStatus.OPTIMAL,
        workloads=[WorkloadDecision(name="default/a", decision="defer", reasons=[busy])],
    )
    delays = []
    for count in (0, 1, 3, 30):
        inp = build_input([*o.base_objects(o.node("n1")), _with_retry_count(count)], ["optsched"])
        [action] = decide(inp, plan, now=LATER).actions
        delays.append(action.check.requeue_after_seconds)
    assert delays == [60, 120, 480, DeferPolicy.max_retry_after_seconds]
    assert _deferred(busy, requeues=2).check.requeue_after_seconds == 240, "requeueState counts too"


NEVER = Reason(code=ReasonCode.POD_TOO_LARGE, message="asks 16 GPUs, nodes have 8", permanent=True)


def test_a_workload_that_can_never_fit_is_told_so_then_rejected_once_its_hold_is_over():
    first = _deferred(NEVER)
    assert first.kind == ActionKind.RELEASE, "the first verdict alone rejects nothing"
    waiting = decide(
        build_input([*o.base_objects(o.node("n1")), o.workload("a", gpus=8)], ["optsched"]),
        Plan(
            status=PlanStatus.OPTIMAL,
            workloads=[WorkloadDecision(name="default/a", decision="defer", reasons=[NEVER])],
        ),
        now=NOW,
    ).actions[0]
    said = waiting.check.message
    action = _deferred(NEVER, message=said)
    assert action.kind == ActionKind.REJECT and action.check.state == "Rejected"
    assert "can never fit" in action.check.message and "16 GPUs" in action.check.message


def test_never_fits_is_not_believed_while_a_node_is_unusable():
    said = "optsched: waiting (cannot fit this cluster as it stands): asks 16 GPUs, nodes have 8"
    broken = o.node("n2", topology="{not json")
    down = o.node("n3", ready=False)
    for unusable in (broken, down):
        action = _deferred(NEVER, o.node("n1"), unusable, message=said)
        assert action.kind == ActionKind.RELEASE, unusable["metadata"]["name"]


def test_an_invalid_workload_is_rejected_with_its_problem_through_the_real_loop():
    broken = o.workload("bad", gpus=8)
    broken["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "nvidia.com/gpucores"
    ] = "0"
    ctl = controller([*o.base_objects(o.node("n1")), broken])
    result = asyncio.run(ctl.cycle())
    [action] = result.decisions.actions
    assert action.kind == ActionKind.REJECT and action.check.state == "Rejected"
    assert "gpucores" in action.check.message
    applied = [w for w in ctl.writer.sent if w.verb == "apply-status"]
    assert applied and applied[0].body["status"]["admissionChecks"][0]["state"] == "Rejected"


def test_a_workload_kueue_is_evicting_is_neither_planned_nor_admitted():
    evicting = o.workload("a", gpus=8)
    evicting["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    inp = build_input([*o.base_objects(o.node("n1")), evicting], ["optsched"])
    assert inp.snapshot.workloads == ()
    plan = Plan(status=PlanStatus.OPTIMAL, workloads=[])
    assert decide(inp, plan, now=NOW).of_kind("admit") == []


def test_checks_of_ours_left_apart_are_brought_together_with_the_ready_ones_updates():
    w = o.workload("a", gpus=8, check="Ready", admitted=False, extra_checks=("optsched-b",))
    updates = [{"name": "main", "labels": {"optsched.io/plan-id": "p1"}}]
    w["status"]["admissionChecks"][0]["podSetUpdates"] = updates
    w["status"]["admissionChecks"][1]["state"] = "Pending"
    inp = build_input([*o.base_objects(o.node("n1")), w], ["optsched", "optsched-b"])
    [action] = decide(inp, None, now=NOW).actions
    assert action.kind == ActionKind.SYNC
    [entry] = action.check.entries()
    assert entry["name"] == "optsched-b" and entry["state"] == "Ready" and entry["podSetUpdates"] == updates


def test_a_workload_placed_by_kueue_tas_is_rejected_not_pinned():
    tas = o.workload("a", gpus=8)
    tas["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": ["kubernetes.io/hostname"]
    }
    inp = build_input([*o.base_objects(o.node("n1")), tas], ["optsched"])
    assert inp.snapshot.workloads == ()
    [action] = decide(inp, None, now=NOW).actions
    assert action.kind == ActionKind.REJECT and "Topology Aware" in action.check.message


def test_every_check_of_ours_on_one_workload_gets_the_decision():
    ctl = controller(
        [*o.base_objects(o.node("n1")), o.workload("a", gpus=8, extra_checks=("optsched-b",))],
    )
    ctl.options = ctl.options.__class__(dry_run=True, check_names=("optsched", "optsched-b"))
    ctl.actor.options = ctl.options
    result = asyncio.run(ctl.cycle())
    assert [a.key for a in result.decisions.of_kind("admit")] == ["default/a"]
    [apply] = [w for w in ctl.writer.sent if w.verb == "apply-status"]
    entries = apply.body["status"]["admissionChecks"]
    assert [(e["name"], e["state"]) for e in entries] == [("optsched", "Ready"), ("optsched-b", "Ready")]


def test_our_gate_is_lifted_from_pods_of_queues_that_are_not_ours_only():
    foreign_cq = o.cluster_queue("cpu", checks=())
    objects = [
        *o.base_objects(o.node("n1")),
        foreign_cq,
        o.local_queue("batch", cq="cpu"),
    ]
    pods = [
        o.pod("theirs", plan_id=None, queue="batch"),
        o.pod("ours", plan_id=None, queue="team"),
        o.pod("unknown", plan_id=None, queue="nowhere"),
    ]
    out = decide(build_input(objects, ["optsched"], pods=pods), None, now=NOW)
    assert [u.name for u in out.ungates] == ["theirs"]
    assert out.ungates[0].patch()["spec"] == {"schedulingGates": None}


def test_a_placement_too_large_for_an_annotation_is_rejected_not_retried_forever(monkeypatch):
    from optsched.controller import decide as decide_module
    from optsched.model.placement import PodPlacement
    from optsched.model.plan import PodSetPlacement

    monkeypatch.setattr(decide_module, "MAX_ANNOTATION_BYTES", 64)
    inp = build_input([*o.base_objects(o.node("n1")), o.workload("a", gpus=8)], ["optsched"])
    slots = [PodPlacement(index=0, node="n1", gpus=list(range(8)))]
    decision = WorkloadDecision(
        name="default/a",
        decision="admit",
        gpus=8,
        pod_sets=[PodSetPlacement(name="main", flavor="default", pods=slots)],
    )
    [action] = decide(inp, Plan(status=PlanStatus.OPTIMAL, workloads=[decision]), now=NOW).actions
    assert action.kind == ActionKind.REJECT and "annotation may hold" in action.check.message


def test_a_workload_whose_template_carries_optscheds_pod_annotations_is_rejected():
    forged = o.workload("forged", gpus=8)
    forged["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": {"optsched.io/gpus": "0,1"}}
    inp = build_input([*o.base_objects(o.node("n1")), forged], ["optsched"])
    assert inp.snapshot.workloads == ()
    [action] = decide(inp, None, now=NOW).actions
    assert action.kind == ActionKind.REJECT
    assert "spec.podSets[0].template.metadata.annotations" in action.check.message
