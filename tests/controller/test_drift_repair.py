"""Drift taking a predicted NVLink island of a pod not started re-plans its workload; other drift does not."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from optsched.controller.decide import ActionKind, decide
from optsched.controller.events import EventReason
from optsched.controller.inputs import build_input
from optsched.controller.records import PlacementRecord
from optsched.model.placement import Enforcement, PodPlacement
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
ISLANDS = [[0, 1], [2, 3], [4, 5], [6, 7]]
PAIRS = json.dumps({"nvlinkIslands": ISLANDS})


def _workload(gpus: tuple[int, ...], how: Enforcement = Enforcement.PREDICTED):
    slot = PodPlacement(index=0, node="a100", gpus=gpus, enforcement=how, node_order=0)
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (slot,)})
    return o.workload("a", check="Ready", admitted=True, record=record.to_annotation(), gpus=len(gpus))


def _actions(workload, held, pods=()):
    objects = [
        *o.base_objects(o.node("a100", topology=PAIRS)),
        workload,
        o.node_gpus("a100", held, islands=ISLANDS),
    ]
    return decide(build_input(objects, ["optsched"], pods=pods), None, now=NOW).actions


def test_an_island_taken_by_another_pod_replans_a_workload_that_has_not_started():
    [action] = _actions(_workload((2, 3)), {"other": [1, 2]})
    assert action.kind == ActionKind.REPLAN and action.check is not None
    assert action.check.state == "Retry"
    assert "default/other holds GPU 2" in action.check.message and "island 2,3" in action.check.message
    assert action.event is not None and action.event.reason == EventReason.PREDICTION_BROKEN


def test_drift_elsewhere_one_gpu_pods_dra_slots_and_started_workloads_are_left_alone():
    assert _actions(_workload((2, 3)), {"other": [4, 5]}) == ()
    assert _actions(_workload((2,)), {"other": [2]}) == ()
    assert _actions(_workload((2, 3), Enforcement.DRA), {"other": [2]}) == ()
    started = o.pod("a-0", plan_id="p1", gated=False, pinned_index=0, node="a100", gpus=2, phase="Running")
    assert _actions(_workload((2, 3)), {"other": [2]}, pods=[started]) == ()
