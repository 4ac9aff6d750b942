"""The cycle's last phase: send what was decided. The only part of a cycle that writes.

Pods are pinned first (they wait for it), then each workload's writes go in
order (record, then check), then the Events: on workloads whose writes went
through, and on unusable objects. Pods and
workloads proceed concurrently, at most ``concurrency`` writes in flight.
Every write is idempotent: one that fails is logged and sent again by the
next cycle, and a pin that meets a changed pod is retried at once on a fresh
read (``on_conflict``). Leadership is checked before every write, so a
replica that lost the Lease mid-cycle stops writing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from optsched.controller.clock import Clock
from optsched.controller.decide import ActionKind, Decisions, WorkloadAction
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.pinning import PodPin
from optsched.kube.client import ApiError
from optsched.kube.writer import Writer
from optsched.model.events import Event
from optsched.model.names import KUEUE_API, PLACEMENT_ANNOTATION

log = logging.getLogger("optsched.controller")


@dataclass(frozen=True)
class Outcome:
    """What the writes of one phase achieved."""

    pinned: int = 0
    errors: tuple[str, ...] = ()
    events: tuple[Event, ...] = ()
    """Events of the writes that went through, sent after all of them."""

    def __add__(self, other: Outcome) -> Outcome:
        return Outcome(self.pinned + other.pinned, self.errors + other.errors, self.events + other.events)


class Actor:
    """Sends decisions through the writer, counting and logging what went through."""

    def __init__(
        self,
        writer: Writer,
        metrics: Metrics,
        options: Options,
        *,
        is_leader: Callable[[], bool],
        clock: Clock,
        on_conflict: Callable[[], None] = lambda: None,
    ) -> None:
        self.writer = writer
        self.metrics = metrics
        self.options = options
        self.is_leader = is_leader
        self.clock = clock
        self.on_conflict = on_conflict
        self._pin_lock = asyncio.Lock()
        """A cycle's pins and a pin pass's never interleave: each matched pods to slots on its own read."""

    @property
    def _dry(self) -> str:
        return "dry-run, not applied: " if self.options.dry_run else ""

    async def _each(self, jobs: Iterable[Awaitable[Outcome]]) -> Outcome:
        semaphore = asyncio.Semaphore(self.options.concurrency)

        async def one(job: Awaitable[Outcome]) -> Outcome:
            async with semaphore:
                return await job

        total = Outcome()
        for outcome in await asyncio.gather(*(one(job) for job in jobs)):
            total += outcome
        return total

    async def act(self, decisions: Decisions) -> Outcome:
        """Send one cycle's decisions: pins, then each workload's writes, then the Events."""
        pinned = await self.pin(decisions.pins, decisions.waiting)
        applied = await self._each(self._apply(a) for a in decisions.actions if a.writes)
        self.metrics.observe_deferrals(
            [a.reason.value for a in decisions.actions if a.kind == ActionKind.DEFER and a.reason]
        )
        for event in (*applied.events, *decisions.events):
            await self.emit(event)
        return pinned + applied

    async def pin(self, pins: Iterable[PodPin], waiting: Iterable[str] = ()) -> Outcome:
        """Pin every pod (concurrently: each patch is independent)."""
        for line in waiting:
            log.info("pod waits: %s", line)
        async with self._pin_lock:
            return await self._each(self._pin(pin) for pin in pins)

    async def _pin(self, pin: PodPin) -> Outcome:
        if not self.is_leader():
            return Outcome()
        try:
            await self.writer.patch_pod(pin.namespace, pin.name, pin.patch())
        except ApiError as exc:
            if exc.conflict or exc.not_found:
                log.info(
                    "pod %s changed while pinning (%s); pinned again on a fresh read", pin.key, exc.status
                )
                self.on_conflict()
                return Outcome()
            log.warning("pinning %s failed: %s", pin.key, exc)
            return Outcome(errors=(f"pin {pin.key}: {exc}",))
        self.metrics.pinned.inc()
        log.info(
            "%spinned pod %s to %s gpus %s (plan %s, %s[%d])",
            self._dry,
            pin.key,
            pin.slot.node,
            pin.slot.gpus,
            pin.plan_id,
            pin.pod_set,
            pin.slot.index,
        )
        return Outcome(pinned=1)

    async def _write_record(self, action: WorkloadAction, value: str | None) -> None:
        await self.writer.set_annotation(
            KUEUE_API, "workloads", action.namespace, action.name, PLACEMENT_ANNOTATION, value, uid=action.uid
        )

    async def _apply(self, action: WorkloadAction) -> Outcome:
        """One workload's writes, in order; the record is written before the check goes Ready (a crash
        in between is repaired from it) and dropped only after a release has been sent."""
        if not self.is_leader():
            return Outcome()
        release = action.kind == ActionKind.RELEASE
        try:
            if action.record is not None:
                await self._write_record(action, action.record.to_annotation())
            elif action.drop_record and not release:
                await self._write_record(action, None)
            if action.check is not None:
                await self.writer.apply_check(action.namespace, action.name, action.check.entry())
            if action.drop_record and release:
                await self._write_record(action, None)
        except ApiError as exc:
            log.warning("%s %s failed (%s); retried next cycle", action.kind, action.key, exc)
            return Outcome(errors=(f"{action.kind} {action.key}: {exc}",))
        self._applied(action)
        return Outcome(events=(action.event,) if action.event is not None else ())

    def _applied(self, action: WorkloadAction) -> None:
        """Count and log one workload's writes once they went through."""
        said = action.check.message if action.check else ""
        if action.kind == ActionKind.ADMIT:
            self.metrics.admitted.inc()
            log.info("%sadmitted %s: %s", self._dry, action.key, said)
        elif action.kind == ActionKind.RELEASE:
            self.metrics.released.labels(action.reason.value if action.reason else "").inc()
            log.info("%sreleased quota of %s: %s", self._dry, action.key, said)
        elif action.kind == ActionKind.REPLAN:
            log.warning("%sre-planning %s: %s", self._dry, action.key, said)
        elif action.check is not None:
            log.info("%s%s %s: %s", self._dry, action.kind, action.key, said)

    async def emit(self, event: Event) -> None:
        if not self.is_leader():
            return
        await self.writer.event(event, at=self.clock())
