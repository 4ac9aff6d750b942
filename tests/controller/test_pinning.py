from __future__ import annotations

from optsched.controller.pinning import pins_for as pins_of_views
from optsched.controller.records import PlacementRecord
from optsched.controller.views import read_pod, read_workload
from optsched.model.names import GPUS_ANNOTATION, HOSTNAME_LABEL, POD_INDEX_ANNOTATION, SCHEDULING_GATE
from optsched.model.placement import PodPlacement
from tests.controller import objects as o


def _ready(record, **fields):
    return read_workload(
        o.workload("a", check="Ready", admitted=True, record=record.to_annotation(), **fields), ["optsched"]
    )


def pins_for(pods, records, **options):
    views = {("default", plan_id): _ready(record) for plan_id, record in records.items()}
    return pins_of_views([read_pod(p) for p in pods], views, **options)


RECORD = PlacementRecord(
    plan_id="p1",
    pod_sets={
        "main": (
            PodPlacement(index=0, node="n1", gpus=(0, 1)),
            PodPlacement(index=1, node="n2", gpus=(2, 3)),
            PodPlacement(index=2, node="n3", gpus=None),
        )
    },
)


def test_indexed_pods_take_the_slot_of_their_completion_index():
    pods = [o.pod("a-2", plan_id="p1", index=2), o.pod("a-0", plan_id="p1", index=0)]
    result = pins_for(pods, {"p1": RECORD})
    assert {p.name: p.slot.node for p in result.pins} == {"a-0": "n1", "a-2": "n3"}


def test_unindexed_pods_get_free_slots_in_creation_then_name_order():
    pods = [
        o.pod("b", plan_id="p1", created="2026-01-01T00:00:02Z"),
        o.pod("a", plan_id="p1", created="2026-01-01T00:00:02Z"),
        o.pod("z", plan_id="p1", created="2026-01-01T00:00:01Z"),
    ]
    result = pins_for(pods, {"p1": RECORD})
    assert [(p.name, p.slot.index) for p in result.pins] == [("z", 0), ("a", 1), ("b", 2)]


def test_slots_held_by_pinned_pods_are_never_handed_out_twice():
    pinned = o.pod("old", plan_id="p1", gated=False, pinned_index=0)
    pods = [pinned, o.pod("new1", plan_id="p1"), o.pod("new2", plan_id="p1"), o.pod("new3", plan_id="p1")]
    result = pins_for(pods, {"p1": RECORD})
    assert sorted(p.slot.index for p in result.pins) == [1, 2]
    assert len(result.waiting) == 1 and "taken" in result.waiting[0]


def test_finished_pod_frees_its_slot_for_a_replacement():
    done = o.pod("old", plan_id="p1", gated=False, pinned_index=0, phase="Failed")
    result = pins_for([done, o.pod("again", plan_id="p1", index=0)], {"p1": RECORD})
    assert [(p.name, p.slot.index) for p in result.pins] == [("again", 0)]


def test_pods_of_unknown_plans_or_without_our_gate_are_untouched():
    pods = [
        o.pod("foreign", plan_id=None),
        o.pod("other-plan", plan_id="zzz"),
        o.pod("ungated", plan_id="p1", gated=False),
    ]
    assert pins_for(pods, {"p1": RECORD}).pins == ()


def test_pin_patch_sets_node_gpus_and_index_and_removes_only_our_gate():
    pod = o.pod("a-0", plan_id="p1", index=0)
    pod["spec"]["schedulingGates"].append({"name": "someone.else/gate"})
    [pin] = pins_for([pod], {"p1": RECORD}).pins
    patch = pin.patch()
    assert patch["spec"]["nodeSelector"] == {HOSTNAME_LABEL: "n1"}
    assert patch["spec"]["schedulingGates"] == [{"name": "someone.else/gate"}]
    assert patch["metadata"]["annotations"] == {POD_INDEX_ANNOTATION: "0", GPUS_ANNOTATION: "0,1"}
    assert patch["metadata"]["resourceVersion"] == "7"


def test_last_gate_removed_clears_the_list_and_unknown_gpus_are_not_annotated():
    [pin] = pins_for([o.pod("a-2", plan_id="p1", index=2)], {"p1": RECORD}).pins
    patch = pin.patch()
    assert patch["spec"]["schedulingGates"] is None
    assert GPUS_ANNOTATION not in patch["metadata"]["annotations"]
    assert SCHEDULING_GATE not in str(patch)


def test_only_ready_unfinished_workloads_offer_slots():
    from optsched.controller.pinning import ready_records

    annotation = RECORD.to_annotation()
    ready = o.workload("a", check="Ready", record=annotation)
    pending = o.workload("b", check="Pending", record=annotation.replace("p1", "p2"))
    broken = o.workload("c", check="Ready", record="{oops")
    views = [read_workload(w, ["optsched"], spec=False) for w in (ready, pending, broken)]
    assert list(ready_records(views)) == [("default", "p1")]
