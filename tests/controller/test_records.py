from __future__ import annotations

import pytest

from optsched.controller.records import RecordError, plan_id_for, record_from_decision, record_of
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
