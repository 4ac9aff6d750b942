"""Which LocalQueues optsched decides, as this replica last read them: what the webhook answers from.

Every replica serves the webhook, leader or not, so every replica runs this
refresher. It lists LocalQueues and ClusterQueues, computes the verdicts with
:func:`~optsched.kueue.managed_queues.managed_local_queues` and swaps them in
as one immutable value, which the webhook's threads read without a lock. A
watch on either kind (or, failing that, the periodic resync) triggers the
next read; the watch only wakes the refresher, the list is the truth, so a
missed or reordered event costs nothing. Until the first read succeeds
every verdict is None, and the webhook gates (fail closed). A failed read
keeps the verdicts of the last good one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from optsched.kube.client import ApiError, Client
from optsched.kueue.managed_queues import ManagedQueues, managed_local_queues
from optsched.model.names import KUEUE_API

log = logging.getLogger("optsched.webhook")

KINDS = (("LocalQueue", "localqueues"), ("ClusterQueue", "clusterqueues"))
MAX_BACKOFF_S = 30.0


async def _wake_on_changes(client: Client, plural: str, wake: Callable[[], None]) -> None:
    """Call ``wake`` on every event of a watch on ``plural``; reconnect with backoff, until cancelled."""
    backoff = 1.0
    while True:
        try:
            async for _event in client.watch(KUEUE_API, plural):
                backoff = 1.0
                wake()
        except Exception as exc:  # the watch only wakes the refresher: whatever ends it, reconnect
            log.debug("watch %s ended: %s", plural, exc)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_S)


class QueueVerdicts:
    """The current :class:`ManagedQueues` of this replica, kept fresh by :meth:`run`."""

    def __init__(
        self,
        client: Client,
        check_names: Iterable[str],
        *,
        resync_s: float = 60.0,
        settle_s: float = 0.2,
    ) -> None:
        self.client = client
        self.check_names = tuple(check_names)
        self.resync_s, self.settle_s = resync_s, settle_s
        self._current = ManagedQueues()
        self.reads = 0
        """Successful reads so far (0: nothing read yet, every verdict None)."""

    def current(self) -> ManagedQueues:
        """The verdicts of the last successful read (safe from any thread)."""
        return self._current

    async def refresh(self) -> None:
        """Read both kinds once and swap in the verdicts they give (``ApiError`` if a list fails)."""
        objects: list[dict[str, Any]] = []
        for kind, plural in KINDS:
            items = await self.client.list(KUEUE_API, plural)
            objects += [{**item, "kind": kind} for item in items]
        self._current = managed_local_queues(objects, self.check_names)
        self.reads += 1

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh now, on every watch event and every ``resync_s``, until ``stop`` is set."""
        changed = asyncio.Event()
        watches = [
            asyncio.create_task(_wake_on_changes(self.client, plural, changed.set)) for _, plural in KINDS
        ]
        try:
            while not stop.is_set():
                changed.clear()
                try:
                    await self.refresh()
                except ApiError as exc:
                    log.warning("cannot read LocalQueues/ClusterQueues, keeping the last verdicts: %s", exc)
                await _first(stop, changed, timeout=self.resync_s)
                if changed.is_set() and not stop.is_set():
                    await asyncio.sleep(self.settle_s)  # a burst of queue edits makes one read
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)


async def _first(*events: asyncio.Event, timeout: float) -> None:
    """Return when any of ``events`` is set, or after ``timeout`` seconds."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
