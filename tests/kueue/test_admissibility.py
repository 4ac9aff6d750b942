"""Kueue's admissibility, rule by rule: a Workload Kueue would not admit is deferred in its words.

Every rule is checked through the whole pipeline (raw objects -> snapshot ->
plan): the held Workload is deferred with the reason code and Kueue's text,
and a well-queued Workload of the same snapshot is still admitted.
"""

from __future__ import annotations

from typing import Any

from optsched.kueue.admissibility import judge
from optsched.model.admission import AdmissionFacts, ClusterQueueState, LocalQueueState
from optsched.model.plan import Plan
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import Snapshot
from optsched.planning import plan
from optsched.snapshot.build import snapshot_from_objects
from tests.builders import gpu_queue, node, pods, snapshot, workload
from tests.kueue import objects as o


def planned(objects: list[dict[str, Any]]) -> tuple[Snapshot, Plan]:
    snap = snapshot_from_objects(objects, source="dump.yaml")
    return snap, plan(snap, policy="bestfit")


def held_reason(objects: list[dict[str, Any]], bad: dict[str, Any]) -> Reason:
    """The only reason of ``bad``'s deferral, once ``team/good`` was checked to be admitted."""
    snap, result = planned([*objects, o.workload("good"), bad])
    good = result.decision("team/good")
    assert good is not None and good.decision == "admit"
    key = f"{bad['metadata']['namespace']}/{bad['metadata']['name']}"
    decision = result.decision(key)
    assert decision is not None and decision.decision == "defer"
    assert not decision.pod_sets
    assert [h.workload.key for h in snap.held] == [key]
    assert key not in {w.key for w in snap.workloads}
    [reason] = decision.reasons
    assert reason.permanent is False
    return reason


def test_a_missing_local_queue_is_kueues_doesnt_exist() -> None:
    reason = held_reason(o.cluster(), o.workload("bad", queue="nope"))
    assert reason.code == ReasonCode.QUEUE_NOT_FOUND
    assert reason.message == "LocalQueue nope doesn't exist"
    assert reason.scope == "LocalQueue team/nope"


def test_a_local_queue_in_another_namespace_does_not_count() -> None:
    reason = held_reason(o.cluster(), o.workload("bad", namespace="elsewhere"))
    assert (reason.code, reason.message) == (ReasonCode.QUEUE_NOT_FOUND, "LocalQueue lq doesn't exist")


def test_a_local_queue_pointing_at_a_missing_cluster_queue() -> None:
    objects = [*o.cluster(), o.local_queue("orphan", cq="gone")]
    reason = held_reason(objects, o.workload("bad", queue="orphan"))
    assert reason.code == ReasonCode.CLUSTER_QUEUE_NOT_FOUND
    assert reason.message == "ClusterQueue gone doesn't exist"
    assert (reason.scope, reason.cluster_queue) == ("ClusterQueue gone", "gone")


def test_an_empty_queue_name_is_in_no_local_queue() -> None:
    reason = held_reason(o.cluster(), o.workload("bad", queue=""))
    assert reason.code == ReasonCode.NO_QUEUE_NAME
    assert "spec.queueName is empty" in reason.message and reason.scope == "spec.queueName"


def test_a_stopped_local_queue_is_inactive() -> None:
    objects = [*o.cluster(), o.local_queue("held", stop="Hold")]
    reason = held_reason(objects, o.workload("bad", queue="held"))
    assert reason.code == ReasonCode.LOCAL_QUEUE_INACTIVE
    assert reason.message == "LocalQueue held is inactive (spec.stopPolicy Hold)"
    assert reason.scope == "LocalQueue team/held"


def test_a_stopped_cluster_queue_is_inactive_in_its_condition_words() -> None:
    objects = [
        *o.cluster(),
        o.cluster_queue("drained", selector={}, stop="HoldAndDrain"),
        o.local_queue("to-drained", cq="drained"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="to-drained"))
    assert reason.code == ReasonCode.CLUSTER_QUEUE_INACTIVE
    assert (
        reason.message == "ClusterQueue drained is inactive (Stopped): Can't admit new workloads: is stopped."
    )
    assert (reason.scope, reason.cluster_queue) == ("ClusterQueue drained", "drained")


def test_a_terminating_cluster_queue_admits_nothing_new() -> None:
    going = o.cluster_queue("going", selector={})
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    reason = held_reason(
        [*o.cluster(), going, o.local_queue("q2", cq="going")], o.workload("bad", queue="q2")
    )
    assert reason.message == (
        "ClusterQueue going is inactive (Terminating): Can't admit new workloads; clusterQueue is terminating"
    )


def test_a_cluster_queue_whose_own_status_says_inactive_is_inactive_with_its_message() -> None:
    condition = {
        "status": "False",
        "reason": "TopologyNotFound",
        "message": 'Can\'t admit new workloads: there is no Topology "dc" for TAS flavor "gpu".',
    }
    objects = [
        *o.cluster(),
        o.cluster_queue("tas", selector={}, condition=condition),
        o.local_queue("q2", cq="tas"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="q2"))
    assert reason.code == ReasonCode.CLUSTER_QUEUE_INACTIVE
    assert reason.message == f"ClusterQueue tas is inactive (TopologyNotFound): {condition['message']}"


def test_a_cluster_queue_naming_a_missing_flavor() -> None:
    objects = [
        *o.cluster(),
        o.cluster_queue("h200", flavors=("h200",), selector={}),
        o.local_queue("q2", cq="h200"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="q2"))
    assert reason.code == ReasonCode.CLUSTER_QUEUE_INACTIVE
    assert reason.message == (
        "ClusterQueue h200 is inactive (FlavorNotFound): "
        "Can't admit new workloads: references missing ResourceFlavor(s): h200."
    )
    assert (reason.scope, reason.flavor) == ("ResourceFlavor h200", "h200")


def test_a_cluster_queue_naming_a_missing_admission_check() -> None:
    objects = [
        *o.cluster(),
        o.cluster_queue("cq2", checks=("prov", "gone"), selector={}),
        o.local_queue("q2", cq="cq2"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="q2"))
    assert reason.code == ReasonCode.CLUSTER_QUEUE_INACTIVE
    assert reason.message == (
        "ClusterQueue cq2 is inactive (AdmissionCheckNotFound): "
        "Can't admit new workloads: references missing AdmissionCheck(s): gone."
    )
    assert reason.scope == "AdmissionCheck gone"


def test_an_admission_check_that_is_not_active_makes_its_queue_inactive() -> None:
    objects = [
        *o.cluster(),
        o.admission_check("sleepy", active="False"),
        o.cluster_queue("cq2", checks=("sleepy",), selector={}),
        o.local_queue("q2", cq="cq2"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="q2"))
    assert "references inactive AdmissionCheck(s): sleepy" in reason.message
    assert reason.message.startswith("ClusterQueue cq2 is inactive (AdmissionCheckInactive)")


def test_every_cause_is_listed_in_kueues_order() -> None:
    cq = o.cluster_queue("cq2", flavors=("h200",), checks=("gone",), selector={}, stop="Hold")
    reason = held_reason([*o.cluster(), cq, o.local_queue("q2", cq="cq2")], o.workload("bad", queue="q2"))
    assert reason.message == (
        "ClusterQueue cq2 is inactive (Stopped): Can't admit new workloads: is stopped, "
        "references missing ResourceFlavor(s): h200, references missing AdmissionCheck(s): gone."
    )


def test_a_namespace_its_cluster_queue_does_not_select() -> None:
    cq = o.cluster_queue(selector={"matchLabels": {"team": "a"}})
    objects = [*o.cluster(cq=cq), o.namespace("team", team="a"), o.namespace("other", team="b")]
    objects.append(o.local_queue(namespace="other"))
    reason = held_reason(objects, o.workload("bad", namespace="other"))
    assert reason.code == ReasonCode.NAMESPACE_NOT_SELECTED
    assert reason.message == (
        "workload namespace doesn't match ClusterQueue selector "
        "(ClusterQueue cq selects team=a; Namespace other does not match)"
    )
    assert (reason.scope, reason.cluster_queue) == ("Namespace other", "cq")


def test_a_selector_matching_the_namespace_labels_admits() -> None:
    cq = o.cluster_queue(
        selector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}
    )
    objects = [*o.cluster(cq=cq), o.namespace("team", tier="silver"), o.workload("good")]
    snap, result = planned(objects)
    assert snap.held == () and snap.warnings == ()
    decision = result.decision("team/good")
    assert decision is not None and decision.decision == "admit"


def test_a_missing_namespace_selector_selects_no_namespace() -> None:
    objects = [
        *o.cluster(),
        o.cluster_queue("closed", selector=None),
        o.local_queue("q2", cq="closed"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="q2"))
    assert reason.code == ReasonCode.NAMESPACE_NOT_SELECTED
    assert "ClusterQueue closed has no spec.namespaceSelector, which selects no namespace" in reason.message


def test_a_selector_on_the_name_label_needs_no_namespace_object() -> None:
    cq = o.cluster_queue(selector={"matchLabels": {"kubernetes.io/metadata.name": "team"}})
    objects = [*o.cluster(cq=cq), o.local_queue(namespace="other")]
    reason = held_reason(objects, o.workload("bad", namespace="other"))
    assert reason.code == ReasonCode.NAMESPACE_NOT_SELECTED
    assert "Namespace other does not match" in reason.message


def test_a_labelled_selector_without_the_namespace_object_selects_it_with_a_warning() -> None:
    cq = o.cluster_queue(selector={"matchLabels": {"team": "a"}})
    snap, result = planned([*o.cluster(cq=cq), o.workload("good"), o.workload("also")])
    assert snap.held == ()
    assert result.decision("team/good") is not None
    [warning] = snap.warnings
    assert "ClusterQueue cq selects namespaces by label (team=a)" in warning
    assert "no Namespace team: team is taken as selected" in warning


def test_a_dump_without_queue_objects_plans_as_before() -> None:
    snap, result = planned([o.node(), o.workload("good", queue=""), o.workload("other", queue="nope")])
    assert snap.held == () and snap.warnings == ()
    assert {d.name for d in result.admitted} == {"team/good", "team/other"}


def test_a_dump_without_admission_checks_takes_them_as_existing_and_warns_once() -> None:
    objects = [o.node(), o.flavor(), o.cluster_queue(selector={}, checks=("prov",)), o.local_queue()]
    snap, result = planned([*objects, o.workload("good"), o.workload("also")])
    assert snap.held == ()
    assert {d.name for d in result.admitted} == {"team/good", "team/also"}
    assert snap.warnings == (
        "ClusterQueue cq requires AdmissionCheck(s) prov, which cannot be verified: the snapshot holds no "
        "AdmissionCheck objects; they are taken to exist and be active",
    )


def test_cluster_queues_without_any_local_queue_plan_as_before_with_a_warning() -> None:
    snap, _ = planned([o.node(), o.flavor(), o.admission_check(), o.cluster_queue(), o.workload("good")])
    assert snap.held == ()
    assert any("holds ClusterQueues but no LocalQueue" in w for w in snap.warnings)


def test_a_reserved_workload_is_released_only_for_what_kueue_releases_it_for() -> None:
    # A missing flavor keeps new work out, but Kueue keeps a reservation made before.
    missing_flavor = o.cluster_queue(flavors=("gpu", "gone"), selector={})
    snap, _ = planned(
        [*o.cluster(cq=missing_flavor), o.workload("kept", reserved_in="cq"), o.workload("new")]
    )
    assert [w.name for w in snap.workloads] == ["kept"]
    assert [h.workload.name for h in snap.held] == ["new"]
    # A stopped ClusterQueue releases it, in Kueue's words for a released reservation.
    objects = [
        *o.cluster(),
        o.cluster_queue("frozen", selector={}, stop="Hold"),
        o.local_queue("to-frozen", cq="frozen"),
    ]
    reason = held_reason(objects, o.workload("bad", queue="to-frozen", reserved_in="frozen"))
    assert (reason.code, reason.message) == (
        ReasonCode.CLUSTER_QUEUE_INACTIVE,
        "ClusterQueue frozen is stopped",
    )


def test_a_reserved_workload_whose_local_queue_is_gone() -> None:
    reason = held_reason(o.cluster(), o.workload("bad", queue="deleted", reserved_in="cq"))
    assert (reason.code, reason.message) == (
        ReasonCode.QUEUE_NOT_FOUND,
        "LocalQueue deleted is terminating or missing",
    )


def test_own_admission_checks_count_as_existing_and_active() -> None:
    cq = gpu_queue("cq", gpus=8).model_copy(update={"admission_checks": ("optsched",)})
    snap = snapshot([node("n1")], [workload("w", pods(1, 1), queue="lq")], cluster_queues=[cq])
    facts = AdmissionFacts(
        kinds=frozenset({"LocalQueue", "ClusterQueue", "AdmissionCheck"}),
        local_queues={"default/lq": LocalQueueState(namespace="default", name="lq", cluster_queue="cq")},
        cluster_queues={"cq": ClusterQueueState(name="cq", namespace_selector=None)},
    )
    nil_selector = judge(snap.workloads[0], snap, facts, own_checks=("optsched",))
    assert nil_selector.reason is not None and nil_selector.reason.code == ReasonCode.NAMESPACE_NOT_SELECTED
    missing = judge(snap.workloads[0], snap, facts)
    assert (
        missing.reason is not None
        and "references missing AdmissionCheck(s): optsched" in missing.reason.message
    )


def test_an_unreadable_selector_selects_every_namespace_with_a_warning() -> None:
    cq = o.cluster_queue(selector={"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["1"]}]})
    snap, _ = planned([*o.cluster(cq=cq), o.workload("good")])
    assert snap.held == ()
    [warning] = snap.warnings
    assert warning.startswith("dump.yaml: ClusterQueue cq: field spec.namespaceSelector.matchExpressions[0]:")
    assert "read as {} (every namespace selected)" in warning
