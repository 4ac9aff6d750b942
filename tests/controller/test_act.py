"""The last phase: preconditions on every write made from a read, claims on slots, no orphaned writes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from optsched.controller.act import Actor
from optsched.controller.actions import ActionKind, CheckUpdate, Decisions, WorkloadAction
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.pinning import PodPin
from optsched.controller.records import PlacementRecord
from optsched.kube.client import ApiError
from optsched.model.placement import PodPlacement
from optsched.model.snapshot import CheckState


class RecordingWriter:
    """Stands in for :class:`~optsched.kube.writer.Writer`: keeps the calls, fails where told."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail or {}

    async def set_annotation(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("record", {"name": args[3], **kwargs}))
        if f"record {args[3]}" in self.fail:
            raise self.fail[f"record {args[3]}"]
        return "42"

    async def apply_check(self, namespace: str, name: str, entries: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.01)
        self.calls.append(("check", {"name": name, "entries": entries, **kwargs}))

    async def patch_pod(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.calls.append(("pin", {"name": name, "body": body}))

    async def event(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("event", {}))


def _actor(writer: RecordingWriter) -> Actor:
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    return Actor(writer, Metrics(), Options(), is_leader=lambda: True, clock=clock)  # type: ignore[arg-type]


RECORD = PlacementRecord(plan_id="p1", pod_sets={"main": (PodPlacement(index=0, node="n1", gpus=(0,)),)})


def _admit(name: str, rv: str = "5") -> WorkloadAction:
    check = CheckUpdate("optsched", CheckState.READY, "m", "t", resource_version=rv)
    return WorkloadAction(
        "default", name, f"uid-{name}", ActionKind.ADMIT, record=RECORD, check=check, resource_version=rv
    )


def test_the_record_is_written_onto_the_version_read_and_ready_onto_the_version_it_made():
    writer = RecordingWriter()
    asyncio.run(_actor(writer).act(Decisions(actions=(_admit("a"),))))
    [(_, record), (_, check)] = writer.calls
    assert record["uid"] == "uid-a" and record["resource_version"] == "5"
    assert check["uid"] == "uid-a" and check["resource_version"] == "42"
    assert check["entries"][0]["state"] == "Ready"


def test_a_transport_failure_on_one_workload_leaves_the_others_written_and_nothing_running():
    writer = RecordingWriter(fail={"record b": ApiError(0, "cannot reach the API server: timed out")})
    outcome = asyncio.run(_actor(writer).act(Decisions(actions=(_admit("a"), _admit("b"), _admit("c")))))
    checks = sorted(c["name"] for kind, c in writer.calls if kind == "check")
    assert checks == ["a", "c"]
    assert len(outcome.errors) == 1 and "admit default/b" in outcome.errors[0]


def test_an_unexpected_failure_cancels_the_sibling_writes_instead_of_orphaning_them():
    writer = RecordingWriter(fail={"record b": RuntimeError("boom")})
    with pytest.raises(ExceptionGroup):
        asyncio.run(_actor(writer).act(Decisions(actions=(_admit("a"), _admit("b")))))
    assert [c["name"] for kind, c in writer.calls if kind == "check"] == []


def _pin(pod: str, index: int = 0) -> PodPin:
    slot = PodPlacement(index=index, node="n1", gpus=(index,))
    return PodPin("default", pod, "7", "p1", "main", slot, ())


def test_a_slot_just_pinned_is_not_pinned_to_another_pod_by_a_pass_on_an_older_list():
    writer = RecordingWriter()
    actor = _actor(writer)
    asyncio.run(actor.pin([_pin("a-0")]))
    asyncio.run(actor.pin([_pin("a-4"), _pin("a-0"), _pin("a-5", index=1)]))
    pinned = [c["name"] for kind, c in writer.calls if kind == "pin"]
    assert pinned == ["a-0", "a-0", "a-5"]


def _defer(name: str) -> WorkloadAction:
    check = CheckUpdate("optsched", CheckState.PENDING, "optsched: waiting: no GPU is free", "t")
    return WorkloadAction("default", name, f"uid-{name}", ActionKind.DEFER, check=check)


def test_admissions_are_written_before_the_deferral_messages_of_the_same_cycle():
    writer = RecordingWriter()
    deferred = tuple(_defer(f"d{n}") for n in range(40))
    asyncio.run(_actor(writer).act(Decisions(actions=(*deferred, _admit("a")))))
    checks = [c["name"] for kind, c in writer.calls if kind == "check"]
    assert len(checks) == 41
    assert checks.index("a") < Options().concurrency, checks
