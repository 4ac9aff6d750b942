"""When a woken pass starts: once its burst of events is over, bounded, and never on a bare period."""

from __future__ import annotations

import asyncio

from optsched.controller.wakeup import Debounce, Wake, next_pass, settle

GUARD = 30.0
"""Fails a test that would hang; no test asserts on how long anything took."""


def test_an_event_starts_the_pass_long_before_the_interval_and_leaves_the_trigger_clear():
    async def scenario() -> bool:
        trigger, stop = asyncio.Event(), asyncio.Event()
        waiting = asyncio.ensure_future(next_pass(trigger, stop, 3600.0, Debounce(quiet=0.01, most=3600.0)))
        await asyncio.sleep(0)
        trigger.set()
        await asyncio.wait_for(waiting, GUARD)
        return trigger.is_set()

    assert asyncio.run(scenario()) is False


def test_an_event_during_the_burst_extends_the_wait_until_the_events_stop():
    async def scenario() -> list[str]:
        trigger, stop = asyncio.Event(), asyncio.Event()
        seen: list[str] = []

        async def burst() -> None:
            for n in range(5):
                trigger.set()
                seen.append(f"event {n}")
                await asyncio.sleep(0)

        trigger.set()
        settling = asyncio.ensure_future(settle(trigger, stop, Debounce(quiet=0.5, most=3600.0)))
        await burst()
        await asyncio.wait_for(settling, GUARD)
        seen.append("pass")
        return seen

    assert asyncio.run(scenario())[-1] == "pass"


def test_a_stream_that_never_stops_still_gets_a_pass():
    async def scenario() -> bool:
        trigger, stop = asyncio.Event(), asyncio.Event()
        done = asyncio.Event()

        async def stream() -> None:
            while not done.is_set():
                trigger.set()
                await asyncio.sleep(0.001)

        streaming = asyncio.ensure_future(stream())
        trigger.set()
        await asyncio.wait_for(settle(trigger, stop, Debounce(quiet=3600.0, most=0.05)), GUARD)
        done.set()
        await streaming
        return True

    assert asyncio.run(scenario())


def test_an_event_after_the_burst_settled_wakes_the_next_pass():
    async def scenario() -> bool:
        trigger, stop = asyncio.Event(), asyncio.Event()
        trigger.set()
        await asyncio.wait_for(settle(trigger, stop, Debounce(quiet=0.01, most=1.0)), GUARD)
        trigger.set()  # came while the pass ran
        await asyncio.wait_for(next_pass(trigger, stop, 3600.0, Debounce(quiet=0.01, most=1.0)), GUARD)
        return True

    assert asyncio.run(scenario())


def test_stop_ends_every_wait():
    async def scenario() -> bool:
        trigger, stop = asyncio.Event(), asyncio.Event()
        stop.set()
        await asyncio.wait_for(next_pass(trigger, stop, 3600.0, Debounce(quiet=3600.0, most=3600.0)), GUARD)
        trigger.set()
        await asyncio.wait_for(settle(trigger, stop, Debounce(quiet=3600.0, most=3600.0)), GUARD)
        return True

    assert asyncio.run(scenario())


def test_an_event_that_came_while_the_pass_ran_has_waited_enough_and_starts_the_next_at_once():
    async def scenario() -> bool:
        trigger, stop = Wake(), asyncio.Event()
        trigger.set()
        trigger.since -= 10.0  # set while a 10 s pass ran
        await asyncio.wait_for(settle(trigger, stop, Debounce(quiet=3600.0, most=1.0)), GUARD)
        return trigger.is_set()

    assert asyncio.run(scenario()) is False
