"""When the next pass starts: as soon as the events that woke it have stopped arriving, not on a period.

A burst of watch events (Kueue reserving quota for a queue of workloads, a
Job creating its pods) should make one pass, and that pass should start the
moment the burst is over: the pass waits until no new event has come for
``quiet`` seconds, and never longer than ``most`` seconds after the first
one, so a steady stream of events still gets a pass every ``most`` seconds.
An event that arrives while a pass runs wakes the next pass at once. Without
events a pass still runs every ``interval`` seconds, a safety net for a
watch that missed something; it is not what drives the controller.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Debounce:
    """How long a pass waits after the event that woke it."""

    quiet: float
    """Start once no new event has come for this many seconds."""
    most: float
    """Start at the latest this many seconds after the first event, however many follow."""


class Wake(asyncio.Event):
    """An asyncio Event that remembers when it was first set since it was last cleared.

    A burst's ``most`` counts from its first event: one that came while the
    previous pass ran has already waited that long, and its pass starts at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.since = time.monotonic()

    def set(self) -> None:
        if not self.is_set():
            self.since = time.monotonic()
        super().set()


async def _either(first: asyncio.Event, second: asyncio.Event, timeout: float | None) -> None:
    """Return when either event is set, or after ``timeout`` seconds (None: no limit)."""
    if first.is_set() or second.is_set():
        return
    waits = {asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()


async def settle(trigger: asyncio.Event, stop: asyncio.Event, debounce: Debounce) -> None:
    """Wait out a burst that has set ``trigger``: until it is quiet, ``most`` has passed, or ``stop``.

    The trigger is cleared when the wait ends, so an event after that wakes the next pass.
    """
    first = trigger.since if isinstance(trigger, Wake) and trigger.is_set() else time.monotonic()
    deadline = first + debounce.most
    while not stop.is_set():
        trigger.clear()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await _either(trigger, stop, min(debounce.quiet, left))
        if not trigger.is_set():
            break
    trigger.clear()


async def next_pass(trigger: asyncio.Event, stop: asyncio.Event, interval: float, debounce: Debounce) -> None:
    """Wait for the next pass: an event (then the burst settled), ``stop``, or ``interval`` seconds."""
    await _either(trigger, stop, interval)
    if trigger.is_set() and not stop.is_set():
        await settle(trigger, stop, debounce)
