from __future__ import annotations

import json

import pytest

from optsched.controller.records import (
    PlacementRecord,
    RecordError,
    plan_id_for,
    record_from_decision,
    record_of,
)
from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement
from optsched.model.plan import PodSetPlacement, WorkloadDecision


def decision(node: str = "n1") -> WorkloadDecision:
    return WorkloadDecision(
        name="default/a",
        decision="admit",
        pod_sets=[
            PodSetPlacement(
                name="w",
                flavor="f",
                pods=[
                    PodPlacement(index=1, node=node, gpus=[2, 3]),
                    PodPlacement(index=0, node=node, gpus=None),
                ],
            )
        ],
    )


def test_record_round_trips_through_the_annotation():
    record = record_from_decision("u1", decision())
    back = record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: record.to_annotation()}}})
    assert back == record
    assert [s.index for s in back.slots("w")] == [0, 1]
    assert back.slots("w")[1].gpus == (2, 3)
    assert back.flavors == {"w": "f"}


def test_plan_id_is_deterministic_and_depends_on_the_placement():
    assert plan_id_for("u1", decision()) == plan_id_for("u1", decision())
    assert plan_id_for("u1", decision()) != plan_id_for("u1", decision("n2"))
    assert plan_id_for("u1", decision()) != plan_id_for("u2", decision())
    assert len(plan_id_for("u1", decision())) <= 63


def test_absent_record_is_none_and_malformed_is_an_error():
    assert record_of({"metadata": {}}) is None
    with pytest.raises(RecordError, match=PLACEMENT_ANNOTATION):
        record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: '{"planId": ""}'}}})


def test_a_large_record_is_stored_compressed_and_read_back_verified():
    from optsched.kueue.placement_record import COMPRESS_ABOVE_BYTES, MAX_ANNOTATION_BYTES, plan_id_of

    slots = tuple(PodPlacement(index=i, node=f"h100-{i // 8:05d}", gpus=(i % 8,)) for i in range(25_000))
    record = PlacementRecord(plan_id=plan_id_of("u", [("main", slots)]), pod_sets={"main": slots})
    annotation = record.to_annotation()
    assert len(json.dumps(record.model_dump(mode="json", by_alias=True))) > COMPRESS_ABOVE_BYTES
    assert annotation.startswith("zlib:") and len(annotation) < MAX_ANNOTATION_BYTES
    back = record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: annotation}}})
    assert back == record and back.verified("u") and not back.verified("another-uid")


def test_a_corrupt_compressed_record_is_a_record_error():
    for raw in ("zlib:!!!", "zlib:" + "QUJD"):
        with pytest.raises(RecordError):
            record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: raw}}})


def test_a_small_record_is_plain_json_an_older_reader_accepts():
    decision = WorkloadDecision(
        name="default/a",
        decision="admit",
        gpus=1,
        pod_sets=[
            PodSetPlacement(name="main", flavor="f", pods=[PodPlacement(index=0, node="n1", gpus=[0])])
        ],
    )
    annotation = record_from_decision("uid-a", decision).to_annotation()
    assert set(json.loads(annotation)) == {"planId", "podSets", "flavors", "plannedAt"}
    assert json.loads(annotation)["planId"].startswith("v2-")


def test_ids_of_another_scheme_are_trusted_and_this_schemes_are_verified():
    slots = (PodPlacement(index=0, node="n1", gpus=(0,)),)
    assert PlacementRecord(plan_id="3f9c0a", pod_sets={"main": slots}).verified("u")
    assert PlacementRecord(plan_id="v9-abc", pod_sets={"main": slots}).verified("u")
    assert not PlacementRecord(plan_id="v3-abc", pod_sets={"main": slots}).verified("u")
    assert not PlacementRecord(plan_id="v2-abc", pod_sets={"main": slots}).verified("u")


def test_the_plan_id_covers_gpu_uuids_under_a_scheme_of_its_own():
    from optsched.kueue.placement_record import plan_id_of

    plain = (PodPlacement(index=0, node="n1", gpus=(0, 1)),)
    named = (PodPlacement(index=0, node="n1", gpus=(0, 1), gpu_uuids=("GPU-a", "GPU-b")),)
    other = (PodPlacement(index=0, node="n1", gpus=(0, 1), gpu_uuids=("GPU-a", "GPU-c")),)
    assert plan_id_of("u", [("main", plain)]).startswith("v2-")
    # An older reader trusts ids of a scheme it does not know: one covering UUIDs must not be v2-.
    assert plan_id_of("u", [("main", named)]).startswith("v3-")
    record = PlacementRecord(plan_id=plan_id_of("u", [("main", named)]), pod_sets={"main": named})
    assert record.verified("u")
    assert not record.model_copy(update={"pod_sets": {"main": other}}).verified("u")
    assert not record.model_copy(update={"pod_sets": {"main": plain}}).verified("u")


def test_a_slots_uuids_and_enforcement_survive_the_annotation():
    from optsched.model.placement import Enforcement

    slot = PodPlacement(index=0, node="n1", gpus=(0,), gpu_uuids=("GPU-a",), enforcement=Enforcement.DRA)
    record = PlacementRecord(plan_id="p", pod_sets={"main": (slot,)})
    assert record_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: record.to_annotation()}}}) == record
