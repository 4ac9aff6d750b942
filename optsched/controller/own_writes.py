"""A cycle reads the cluster with its previous cycle's writes in it.

Cycles start as soon as events settle, so the next one may begin before the
informers have delivered what the last one wrote. A plan made on such a
read does not see the workloads just admitted as holding their GPUs and
hands the same GPUs out again; the two plans then disagree about a node's
GPUs, and the pods of the later one wait for a pick that never comes. So
each workload write that went through is remembered with the version its
decision was read from, and the next read waits (briefly, bounded) until the
cached Workload has moved past that version. Deferrals are not waited for:
a message changes no capacity.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from optsched.kueue import workload_status as ks

log = logging.getLogger("optsched.controller")

CATCH_UP_SECONDS = 10.0
"""The longest a read waits for the caches to show the last cycle's writes (then reads them as they are)."""
POLL_SECONDS = 0.02


class OwnWrites:
    """The Workloads written by the last act phase, each with the version its decision was read from."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], str] = {}

    def wrote(self, namespace: str, name: str, read_version: str) -> None:
        if read_version:
            self.pending[(namespace, name)] = read_version

    def behind(self, workloads: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
        """The written workloads whose cached object is still the version read before the write.

        One that moved on (or is gone) is forgotten.
        """
        if not self.pending:
            return []
        cached: dict[tuple[str, str], str] = {}
        for obj in workloads:
            meta = ks.meta(obj)
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if key in self.pending:
                cached[key] = str(meta.get("resourceVersion", ""))
        self.pending = {k: v for k, v in self.pending.items() if cached.get(k) == v}
        return sorted(self.pending)

    async def caught_up(
        self, workloads: Callable[[], Iterable[Mapping[str, Any]]], timeout: float = CATCH_UP_SECONDS
    ) -> list[tuple[str, str]]:
        """Wait until no written workload is behind in ``workloads()`` (at most ``timeout`` seconds).

        Returns those still behind when the wait ended (empty when the caches caught up); they are
        forgotten either way, so one lost event never delays more than one read.
        """
        deadline = time.monotonic() + timeout
        late = self.behind(workloads())
        while late and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            late = self.behind(workloads())
        self.pending.clear()
        if late:
            log.debug("read: the caches do not show the last writes to %d workload(s) yet", len(late))
        return late
