from __future__ import annotations

from typing import Any

from optsched.controller.inputs import assumed_pods, build_input, managed_queues
from optsched.controller.records import PlacementRecord
from optsched.controller.views import read_pod, read_workload
from optsched.model.names import KUEUE_API
from optsched.model.placement import PodPlacement
from optsched.model.reasons import ReasonCode
from tests.controller import objects as o
from tests.snapshot.dra_raw import claim_template, with_template_claim


def record(node: str = "n1", count: int = 2) -> PlacementRecord:
    return PlacementRecord(
        plan_id="p1",
        pod_sets={
            "main": tuple(
                PodPlacement(index=i, node=node, gpus=tuple(range(4 * i, 4 * i + 4))) for i in range(count)
            )
        },
    )


def test_admitted_but_unbound_placements_count_as_usage():
    wl = o.workload("a", count=2, gpus=4, check="Ready", admitted=True, record=record().to_annotation())
    inp = build_input([*o.base_objects(o.node("n1")), wl], ["optsched"])
    usage = inp.snapshot.usage_of("n1")
    assert usage.gpu_milli == (1000,) * 8
    assert inp.assumed == 2
    assert inp.snapshot.workloads == ()


def test_bound_pod_replaces_its_assumed_slot():
    wl = o.workload("a", count=2, gpus=4, check="Ready", admitted=True, record=record().to_annotation())
    bound = o.pod("a-0", plan_id="p1", gated=False, node="n1", pinned_index=0, phase="Running")
    bound["metadata"]["annotations"]["optsched.io/gpus"] = "0,1,2,3"
    inp = build_input([*o.base_objects(o.node("n1")), wl, bound], ["optsched"], pods=[bound])
    assert inp.assumed == 1
    assert inp.snapshot.usage_of("n1").gpu_milli == (1000,) * 8


def test_bound_pod_without_index_releases_one_slot():
    wl = read_workload(o.workload("a", count=2, gpus=4, record=record().to_annotation()), ["optsched"])
    bound = o.pod("x", plan_id="p1", gated=False, node="n1", phase="Running")
    assert len(assumed_pods(wl, [read_pod(bound)])) == 1


def test_only_workloads_of_queues_with_our_check_are_planned():
    ours = o.workload("ours")
    theirs = o.workload("theirs", cq="plain", check=None)
    objects = [*o.base_objects(o.node("n1")), o.cluster_queue("plain", checks=()), theirs, ours]
    inp = build_input(objects, ["optsched"])
    assert [w.key for w in inp.snapshot.workloads] == ["default/ours"]
    assert managed_queues(inp.snapshot, ["optsched"]) == {"gpu"}


def test_ready_workloads_are_not_planned_again():
    wl = o.workload("a", check="Ready", record=record().to_annotation())
    inp = build_input([*o.base_objects(o.node("n1")), wl], ["optsched"])
    assert inp.snapshot.workloads == ()


def test_malformed_objects_are_reported_and_skipped_not_fatal():
    bad_node = o.node("bad", topology="{not json")
    bad_wl = o.workload("broken")
    bad_wl["spec"]["podSets"] = "nope"
    bad_record = o.workload("rec", record="{]")
    objects = [*o.base_objects(o.node("n1")), bad_node, bad_wl, bad_record, o.workload("fine")]
    inp = build_input(objects, ["optsched"])
    reported = {(r.kind, r.name) for r in inp.reports}
    assert reported == {("Node", "bad"), ("Workload", "broken"), ("Workload", "rec")}
    assert [n.name for n in inp.snapshot.nodes] == ["n1"]
    assert [w.name for w in inp.snapshot.workloads] == ["fine"]
    assert all(r.message for r in inp.reports)


def test_our_topology_annotation_reaches_the_planner_as_a_required_level():
    wl = o.workload("gang", count=2, gpus=8)
    wl["spec"]["podSets"][0]["template"]["metadata"] = {
        "annotations": {"optsched.io/required-topology": o.RACK}
    }
    inp = build_input([*o.base_objects(o.node("n1")), wl], ["optsched"])
    [planned] = inp.snapshot.workloads
    assert planned.pod_sets[0].required_topology == o.RACK
    assert "kueue.x-k8s.io/podset-required-topology" not in str(inp.workloads["default/gang"])


def test_assumed_usage_is_typed_from_the_pod_template_and_the_planned_gpus():
    wl = o.workload("a", count=2, gpus=4, check="Ready", admitted=True, record=record().to_annotation())
    view = read_workload(wl, ["optsched"])
    slots = assumed_pods(view, [])
    assert [(s.workload, s.node, s.gpus) for s in slots] == [
        ("default/a", "n1", (0, 1, 2, 3)),
        ("default/a", "n1", (4, 5, 6, 7)),
    ]
    assert {s.request.gpus for s in slots} == {4} and {s.request.cpu_milli for s in slots} == {1000}


def test_a_malformed_queue_object_is_reported_and_the_rest_is_still_built():
    bad_cq = o.cluster_queue("broken")
    bad_cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop("nominalQuota")
    objects = [*o.base_objects(o.node("n1")), bad_cq, o.workload("fine")]
    inp = build_input(objects, ["optsched"])
    assert [(r.kind, r.name, r.reason) for r in inp.reports] == [
        ("ClusterQueue", "broken", "InvalidClusterQueue")
    ]
    assert [cq.name for cq in inp.snapshot.cluster_queues] == ["gpu"]
    assert [w.name for w in inp.snapshot.workloads] == ["fine"]


def test_a_bound_pod_that_cannot_be_read_is_reported_and_takes_its_node_out_of_planning():
    """What the pod holds is unknown, so its node is not offered to anyone; other nodes still are."""
    bad = o.pod("bad", plan_id=None, gated=False, node="n1", phase="Running")
    bad["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "lots"
    inp = build_input([*o.base_objects(o.node("n1"), o.node("n2")), bad], ["optsched"])
    assert [(r.kind, r.name) for r in inp.reports] == [("Pod", "bad")]
    assert [n.name for n in inp.snapshot.nodes] == ["n2"]
    assert any("Node n1 is left out of planning" in w for w in inp.snapshot.warnings)


def test_every_workload_gets_a_view_and_only_ours_that_wait_are_actionable():
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("waits"),
        o.workload("done", check="Ready", record=record().to_annotation()),
    ]
    inp = build_input(objects, ["optsched"])
    assert sorted(inp.workloads) == ["default/done", "default/waits"]
    assert inp.workloads["default/waits"].awaits_decision
    assert not inp.workloads["default/done"].awaits_decision
    assert inp.actionable


def test_an_object_of_the_wrong_shape_is_reported_like_a_malformed_one():
    odd = o.cluster_queue("odd")
    odd["spec"]["resourceGroups"][0]["flavors"] = ["not a mapping"]
    inp = build_input([*o.base_objects(o.node("n1")), odd, o.workload("fine")], ["optsched"])
    [report] = inp.reports
    assert (report.kind, report.name, report.reason) == ("ClusterQueue", "odd", "InvalidClusterQueue")
    assert "spec.resourceGroups[0].flavors[0]: expected a mapping" in report.message
    assert [w.name for w in inp.snapshot.workloads] == ["fine"]


def _paused_queue_objects() -> list[dict[str, Any]]:
    """A LocalQueue ``paused`` on hold, one workload queued in it and one in the default queue."""
    paused = o.local_queue("paused")
    paused["spec"]["stopPolicy"] = "Hold"
    held = o.workload("held")
    held["spec"]["queueName"] = "paused"
    return [*o.base_objects(o.node("n1")), paused, o.workload("fine"), held]


def test_workloads_kueue_cannot_admit_are_held_with_kueues_reason():
    inp = build_input(_paused_queue_objects(), ["optsched"])
    assert [w.name for w in inp.snapshot.workloads] == ["fine"]
    [held] = inp.snapshot.held
    assert held.workload.name == "held"
    assert (held.reason.code, held.reason.message) == (
        ReasonCode.LOCAL_QUEUE_INACTIVE,
        "LocalQueue paused is stopped (spec.stopPolicy Hold)",
    )


def test_our_own_admission_check_exists_even_where_the_listing_lacks_it():
    other = {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": "other"}, "spec": {}}
    objects = [*o.base_objects(o.node("n1")), other, o.workload("fine")]
    inp = build_input(objects, ["optsched"])
    assert [w.name for w in inp.snapshot.workloads] == ["fine"]
    assert inp.snapshot.held == () and inp.snapshot.warnings == ()
    # Someone else's check that is missing keeps the workload out, as Kueue would.
    objects[1] = o.cluster_queue(checks=("optsched", "gone"))
    [held] = build_input(objects, ["optsched"]).snapshot.held
    assert "references missing AdmissionCheck(s): gone" in held.reason.message


def test_the_controller_counts_quota_from_the_admitted_workloads_without_a_queue_status():
    """Kueue's status lags (or is absent from a read); the admissions themselves say what is taken."""
    from tests.snapshot import raw

    objects = [
        raw.node("n1"),
        raw.cluster_queue(gpus=4),
        *raw.queue_objects(),
        raw.workload("a", admitted=True, owner="a"),
        raw.workload("b", admitted=True, owner="b"),
        raw.pod("a-0", "n1", owner="a"),
    ]
    inp = build_input(objects, ["optsched"])
    assert inp.snapshot.cluster_queues[0].usage["h100"]["nvidia.com/gpu"] == 4
    # b's pod is not bound yet and its admission names no node: its quota is held all the same.
    assert any("ml/b" in w or "Workload ml/b" in w for w in inp.snapshot.warnings)
    assert [r.kind for r in inp.reports] == []


def test_a_workload_asking_gpus_through_a_claim_template_is_seen_with_them() -> None:
    raw = with_template_claim(o.workload("tpl", check="Ready"), "two-gpus")
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {}
    template = claim_template("two-gpus", 2, namespace="default")
    inp = build_input([*o.base_objects(o.node("n1")), raw, template], ["optsched"])
    view = inp.workloads["default/tpl"]
    assert view.problem is None and view.workload is not None
    assert view.workload.pod_sets[0].request.gpus == 2
