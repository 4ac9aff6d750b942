"""A cycle reads with the last cycle's writes in it: the read waits until the caches moved past them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from optsched.controller.act import Actor
from optsched.controller.actions import ActionKind, CheckUpdate, Decisions, WorkloadAction
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.own_writes import OwnWrites
from optsched.model.snapshot import CheckState
from tests.controller.test_act import RecordingWriter, _admit, _defer


def _cached(name: str, version: str, namespace: str = "default") -> dict:
    return {
        "kind": "Workload",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": version},
    }


def test_a_workload_is_behind_while_its_cached_version_is_the_one_the_decision_read():
    own = OwnWrites()
    own.wrote("default", "a", "5")
    own.wrote("default", "b", "7")
    own.wrote("default", "gone", "9")
    assert own.behind([_cached("a", "5"), _cached("b", "8")]) == [("default", "a")]
    assert own.behind([_cached("a", "6")]) == []
    assert own.pending == {}, "what moved on or went away is forgotten"


def test_the_read_goes_ahead_once_the_informer_delivers_the_write():
    async def scenario() -> list[tuple[str, str]]:
        own = OwnWrites()
        own.wrote("default", "a", "5")
        cache = [_cached("a", "5")]

        async def deliver() -> None:
            await asyncio.sleep(0)
            cache[0] = _cached("a", "6")

        delivering = asyncio.ensure_future(deliver())
        late = await asyncio.wait_for(own.caught_up(lambda: cache, timeout=3600.0), 30.0)
        await delivering
        return late

    assert asyncio.run(scenario()) == []


def test_a_write_whose_event_never_comes_delays_one_read_only():
    async def scenario() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        own = OwnWrites()
        own.wrote("default", "a", "5")
        first = await own.caught_up(lambda: [_cached("a", "5")], timeout=0.05)
        second = await own.caught_up(lambda: [_cached("a", "5")], timeout=3600.0)
        return first, second

    first, second = asyncio.run(scenario())
    assert first == [("default", "a")] and second == []


def _actor(writer: RecordingWriter, *, dry_run: bool = False) -> Actor:
    return Actor(
        writer,  # type: ignore[arg-type]
        Metrics(),
        Options(dry_run=dry_run),
        is_leader=lambda: True,
        clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_admissions_are_remembered_with_the_version_read_and_deferrals_are_not():
    actor = _actor(RecordingWriter())
    deferred = _defer("d")
    deferred = WorkloadAction(
        deferred.namespace,
        deferred.name,
        deferred.uid,
        ActionKind.DEFER,
        check=deferred.check,
        resource_version="3",
    )
    asyncio.run(actor.act(Decisions(actions=(_admit("a", rv="5"), deferred))))
    assert actor.own.pending == {("default", "a"): "5"}


def test_a_dry_run_waits_for_nothing_it_did_not_send():
    actor = _actor(RecordingWriter(), dry_run=True)
    check = CheckUpdate("optsched", CheckState.READY, "m", "t", resource_version="5")
    admit = WorkloadAction("default", "a", "uid-a", ActionKind.ADMIT, check=check, resource_version="5")
    asyncio.run(actor.act(Decisions(actions=(admit,))))
    assert actor.own.pending == {}
