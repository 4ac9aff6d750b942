"""Our AdmissionChecks are kept Active by a reconciler of their own, not by the Workload cycle."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from optsched.controller.admission_check import (
    AdmissionCheckReconciler,
    CheckView,
    concerns_us,
    plan_checks,
    read_check,
)
from optsched.controller.options import Options
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from optsched.model.names import KUEUE_API
from tests.kube.fake import FakeCluster, FakeTransport

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
OURS = Options().controller_name


def check(name: str, controller: str = OURS, *, active: bool = False, generation: int = 3) -> dict:
    conditions = [{"type": "Active", "status": "True"}] if active else []
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name, "generation": generation},
        "spec": {"controllerName": controller},
        "status": {"conditions": conditions},
    }


def test_missing_checks_are_created_and_every_check_of_ours_is_made_active() -> None:
    checks = [
        read_check(c) for c in (check("old"), check("done", active=True), check("theirs", "other.io/x"))
    ]
    plan = plan_checks(checks, Options(check_names=("optsched", "theirs")))
    assert plan.create == ("optsched",)
    assert [c.name for c in plan.activate] == ["old", "optsched"]
    assert [c.generation for c in plan.activate] == [3, 1]
    assert plan.foreign == (CheckView("theirs", "other.io/x", active=False, generation=3),)


def test_without_create_check_a_missing_check_is_left_missing() -> None:
    plan = plan_checks([], Options(create_check=False))
    assert plan.create == () and plan.activate == ()


def test_only_events_about_our_checks_that_need_work_wake_the_reconciler() -> None:
    options = Options()
    assert concerns_us({"type": "ADDED", "object": check("optsched")}, options)
    assert concerns_us({"type": "DELETED", "object": check("optsched", active=True)}, options)
    assert not concerns_us({"type": "MODIFIED", "object": check("optsched", active=True)}, options)
    assert not concerns_us({"type": "ADDED", "object": check("x", "other.io/x")}, options)


def reconciler(objects: list[dict], *, leader: bool = True) -> AdmissionCheckReconciler:
    client = Client(FakeTransport(FakeCluster(objects)))
    return AdmissionCheckReconciler(
        client, Writer(client, dry_run=True), Options(), is_leader=lambda: leader, clock=lambda: NOW
    )


def test_reconcile_creates_then_activates_with_the_injected_clock() -> None:
    rec = reconciler([])
    asyncio.run(rec.reconcile())
    created, applied = rec.writer.sent
    assert (created.verb, created.target) == ("create", "admissionchecks/optsched")
    assert created.body["spec"] == {"controllerName": OURS}
    assert (applied.verb, applied.target) == ("apply", "admissionchecks/optsched/status")
    [condition] = applied.body["status"]["conditions"]
    assert condition["type"] == "Active" and condition["status"] == "True"
    assert condition["lastTransitionTime"] == "2026-01-01T00:01:00Z"


def test_an_active_check_is_left_alone_and_a_follower_writes_nothing() -> None:
    quiet = reconciler([check("optsched", active=True)])
    asyncio.run(quiet.reconcile())
    assert quiet.writer.sent == []
    follower = reconciler([], leader=False)
    asyncio.run(follower.reconcile())
    assert follower.writer.sent == []


def test_run_reconciles_at_start_and_again_when_woken() -> None:
    rec = reconciler([check("optsched")])

    async def scenario() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(rec.run(stop))
        await asyncio.sleep(0.05)
        first = len(rec.writer.sent)
        rec.on_event({"type": "MODIFIED", "object": check("optsched")})
        await asyncio.sleep(0.05)
        stop.set()
        task.cancel()
        return first

    first = asyncio.run(scenario())
    assert first == 1 and len(rec.writer.sent) == 2
