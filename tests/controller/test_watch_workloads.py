"""Which Workload events wake a cycle: what a plan or a decision reads, never a message of ours."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from optsched.controller.act import Actor
from optsched.controller.actions import ActionKind, CheckUpdate, Decisions, WorkloadAction
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.records import PlacementRecord
from optsched.controller.watch import Triggers, WorkloadFilter
from optsched.kube.client import ApiError
from optsched.model.placement import PodPlacement
from optsched.model.snapshot import CheckState
from tests.controller import objects as o


def _event(obj, kind="MODIFIED"):
    return {"type": kind, "object": obj}


def test_a_new_message_on_a_waiting_workload_does_not_wake_a_cycle_but_its_admission_does():
    relevant = WorkloadFilter()
    assert relevant(_event(o.workload("a"), "ADDED"))
    deferred = o.workload("a", message="optsched: waiting: no GPU is free")
    deferred["metadata"]["resourceVersion"] = "2"
    assert not relevant(_event(deferred)), "our own deferral message is nothing new to plan"
    ready = o.workload("a", check="Ready", message="optsched plan p1")
    assert relevant(_event(ready))
    assert relevant(_event(o.workload("a", check="Ready", admitted=True, message="optsched plan p1")))


def test_quota_reserved_a_record_a_requeue_and_a_deletion_each_wake_a_cycle():
    relevant = WorkloadFilter()
    assert relevant(_event(o.workload("a", reserved=False, check=None), "ADDED"))
    assert relevant(_event(o.workload("a")))
    assert relevant(_event(o.workload("a", record='{"planId": "p1"}')))
    assert relevant(_event(o.workload("a", record='{"planId": "p1"}', requeues=1)))
    assert relevant(_event(o.workload("a", record='{"planId": "p1"}', requeues=1), "DELETED"))
    assert relevant.seen == {}, "a deleted workload is forgotten"


def test_workloads_are_told_apart_by_namespace_and_name():
    relevant = WorkloadFilter()
    assert relevant(_event(o.workload("a"), "ADDED"))
    assert relevant(_event(o.workload("b"), "ADDED"))
    other = o.workload("a")
    other["metadata"]["namespace"] = "team-b"
    assert relevant(_event(other, "ADDED"))


def test_the_informer_handler_sets_the_cycle_trigger_only_for_relevant_changes():
    cycle, pin = asyncio.Event(), asyncio.Event()
    handler = Triggers(cycle, pin, lambda event: None).handlers()["Workload"]
    handler(_event(o.workload("a"), "ADDED"))
    assert cycle.is_set()
    cycle.clear()
    handler(_event(o.workload("a", message="optsched: waiting: no GPU is free")))
    assert not cycle.is_set()


class ConflictingWriter:
    async def set_annotation(self, *args, **kwargs):
        raise ApiError(409, "the object has been modified")

    async def apply_check(self, *args, **kwargs):
        raise AssertionError("not reached: the record write failed")


def test_an_admission_that_met_a_newer_version_asks_for_a_cycle_at_once():
    stale = []
    actor = Actor(
        ConflictingWriter(),  # type: ignore[arg-type]
        Metrics(),
        Options(),
        is_leader=lambda: True,
        clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        on_stale=lambda: stale.append(True),
    )
    check = CheckUpdate("optsched", CheckState.READY, "m", "t", resource_version="5")
    record = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="n1", gpus=(0,)),)})
    admit = WorkloadAction(
        "default", "a", "uid-a", ActionKind.ADMIT, record=record, check=check, resource_version="5"
    )
    outcome = asyncio.run(actor.act(Decisions(actions=(admit,))))
    assert len(outcome.errors) == 1 and stale == [True]
