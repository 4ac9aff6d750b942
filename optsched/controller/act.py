"""The cycle's last phase: send what was decided. The only part of a cycle that writes.

Pods are pinned first (they wait for it), then each workload's writes go in
order (record, then check), admissions before the others, then the Events: on workloads whose writes went
through, and on unusable objects. Pods and
workloads proceed concurrently, at most ``concurrency`` writes in flight, in
one task group: a write that fails unexpectedly cancels its siblings instead
of leaving them running past the cycle. Every write is idempotent: one that
fails (an API error or a transport failure) is logged and sent again by the
next cycle, and a pin that meets a changed pod is retried at once on a fresh
read (``on_conflict``). Leadership is checked before every write, so a
replica that lost the Lease mid-cycle stops writing.

A pod on a DRA node gets its ResourceClaim created first
(:mod:`optsched.controller.claim_writes`), then its pin; optsched's claims
whose pod is gone are deleted after the workloads' writes.

A claim found being deleted (its old pod still terminating) or deleted to
be made afresh is not read again at once: each claim backs off (doubling,
capped), and a pin pass is woken when its delay is over.

A slot pinned recently is claimed in memory for the pod it went to, so a
pass working from an older pod list never pins a second pod to it before
the first pin shows in the list.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from optsched.controller import fault
from optsched.controller.backoff import Backoff
from optsched.controller.claim_sweep import OwnedClaim
from optsched.controller.claim_writes import ClaimWriter, WriterApi
from optsched.controller.claims import ClaimVerdict
from optsched.controller.clock import Clock
from optsched.controller.decide import ActionKind, Decisions, WorkloadAction
from optsched.controller.metrics import Metrics
from optsched.controller.mig_decide import NodeMigWrite
from optsched.controller.mig_writes import MigWriter
from optsched.controller.options import Options
from optsched.controller.own_writes import OwnWrites
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


FIRST = frozenset({ActionKind.ADMIT, ActionKind.SYNC})
"""Writes that let a workload start go out before the rest of the cycle's (deferral messages, repairs):
with hundreds of workloads waiting, an admission does not queue behind their messages."""


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
        on_stale: Callable[[], None] = lambda: None,
    ) -> None:
        self.writer = writer
        self.metrics = metrics
        self.options = options
        self.is_leader = is_leader
        self.clock = clock
        self.on_conflict = on_conflict
        self.on_stale = on_stale
        self.own = OwnWrites()
        """The workloads this phase wrote: the next read waits until the caches show them."""
        """Called when a workload's write met a newer version: the next cycle decides on a fresh read now,
        whether or not the change that beat it wakes one."""
        self._pin_lock = asyncio.Lock()
        """A cycle's pins and a pin pass's never interleave: each matched pods to slots on its own read."""
        self.claims = ClaimWriter(WriterApi(writer), metrics)
        """Creates the ResourceClaim of a DRA pin before the pod is ungated."""
        self._claimed: dict[tuple[str, str, str, int], tuple[str, float]] = {}
        """Slot (namespace, plan id, PodSet, index) -> the pod pinned to it and when (monotonic)."""
        self.backoff = Backoff()
        """Claims found being deleted or just deleted: not read again before their delay is over."""
        self.mig = MigWriter(writer, metrics, on_stale=on_stale)
        """Writes MIG layout changes onto the nodes' NodeGPUs."""

    def _retry_later(self, delay: float) -> None:
        """Run a pin pass once ``delay`` is over (the claim may be gone by then)."""
        asyncio.get_running_loop().call_later(delay, self.on_conflict)

    @property
    def _dry(self) -> str:
        return "dry-run, not applied: " if self.options.dry_run else ""

    async def _each(self, jobs: Iterable[Awaitable[Outcome]]) -> Outcome:
        semaphore = asyncio.Semaphore(self.options.concurrency)

        async def one(job: Awaitable[Outcome]) -> Outcome:
            async with semaphore:
                return await job

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(job)) for job in jobs]
        total = Outcome()
        for task in tasks:
            total += task.result()
        return total

    async def act(self, decisions: Decisions) -> Outcome:
        """Send one cycle's decisions: pins, then each workload's writes, then the Events."""
        pinned = await self.pin(decisions.pins, decisions.waiting, decisions.ungates)
        self.mig.observe(decisions.mig)
        applied = await self._each(self._layout(w) for w in decisions.mig.writes)
        writes = sorted((a for a in decisions.actions if a.writes), key=lambda a: a.kind not in FIRST)
        applied += await self._each(self._apply(a) for a in writes)
        applied += await self._each(self._sweep(c) for c in decisions.sweeps)
        self.metrics.observe_deferrals(
            [a.reason.value for a in decisions.actions if a.kind == ActionKind.DEFER and a.reason]
        )
        for event in (*applied.events, *decisions.events):
            await self.emit(event)
        return pinned + applied

    async def pin(
        self, pins: Iterable[PodPin], waiting: Iterable[str] = (), ungates: Iterable[PodPin] = ()
    ) -> Outcome:
        """Pin every pod (concurrently: each patch is independent), and lift our gate from ``ungates``."""
        for line in waiting:
            log.info("pod waits: %s", line)
        async with self._pin_lock:
            fresh = self._unclaimed(pins)
            return await self._each([*(self._pin(pin) for pin in fresh), *(self._pin(u) for u in ungates)])

    CLAIM_SECONDS = 60.0
    """How long a slot stays claimed for the pod pinned to it (the pod list shows the pin long before)."""

    def _unclaimed(self, pins: Iterable[PodPin]) -> list[PodPin]:
        """Pins whose slot no other pod was pinned to recently; claims for the rest are renewed."""
        now = time.monotonic()
        self._claimed = {k: v for k, v in self._claimed.items() if now - v[1] < self.CLAIM_SECONDS}
        out = []
        for pin in pins:
            slot = (pin.namespace, pin.plan_id, pin.pod_set, pin.slot.index)
            holder = self._claimed.get(slot)
            if holder is not None and holder[0] != pin.key:
                log.info(
                    "pod %s waits: slot %s[%d] was just pinned to %s",
                    pin.key,
                    pin.pod_set,
                    pin.slot.index,
                    holder[0],
                )
                continue
            out.append(pin)
        return out

    async def _pin(self, pin: PodPin) -> Outcome:
        if not self.is_leader():
            return Outcome()
        try:
            if pin.claim is not None:
                if self.backoff.holds(pin.claim.key):
                    return Outcome()
                made = await self.claims.ensure(pin.claim)
                if made.verdict == ClaimVerdict.CREATE:
                    fault.reach(fault.AFTER_CLAIM_CREATED)
                if not made.ready:
                    log.info("pod %s waits for its claim (%s) %s", pin.key, made.verdict, made.error)
                    if made.verdict in (ClaimVerdict.DELETE, ClaimVerdict.WAIT):
                        self._retry_later(self.backoff.hold(pin.claim.key))
                    return Outcome()
                self.backoff.clear(pin.claim.key)
            await self.writer.patch_pod(pin.namespace, pin.name, pin.patch())
            if not pin.ungate_only:
                self._claimed[(pin.namespace, pin.plan_id, pin.pod_set, pin.slot.index)] = (
                    pin.key,
                    time.monotonic(),
                )
        except ApiError as exc:
            if exc.conflict or exc.not_found:
                log.info(
                    "pod %s changed while pinning (%s); pinned again on a fresh read", pin.key, exc.status
                )
                self.on_conflict()
                return Outcome()
            log.warning("pinning %s failed: %s", pin.key, exc)
            return Outcome(errors=(f"pin {pin.key}: {exc}",))
        if pin.ungate_only:
            log.info("%slifted our gate from pod %s: its LocalQueue is not optsched's", self._dry, pin.key)
            return Outcome()
        self.metrics.pinned.inc()
        self.metrics.pinned_by.labels(pin.enforcement.value).inc()
        log.info(
            "%spinned pod %s to %s gpus %s (%s; plan %s, %s[%d])",
            self._dry,
            pin.key,
            pin.slot.node,
            pin.slot.gpus,
            pin.enforcement.value,
            pin.plan_id,
            pin.pod_set,
            pin.slot.index,
        )
        return Outcome(pinned=1)

    async def _layout(self, write: NodeMigWrite) -> Outcome:
        """One node's MIG layout patch (an error is retried next cycle, on a fresh read)."""
        if not self.is_leader():
            return Outcome()
        error, events = await self.mig.write(write)
        return Outcome(errors=(error,) if error else (), events=events)

    async def _sweep(self, claim: OwnedClaim) -> Outcome:
        """Delete one orphaned claim (an error is retried next cycle, the claim still being there)."""
        if not self.is_leader():
            return Outcome()
        try:
            await self.claims.sweep(claim)
        except ApiError as exc:
            log.warning("sweeping claim %s failed (%s); retried next cycle", claim.key, exc)
            return Outcome(errors=(f"sweep {claim.key}: {exc}",))
        return Outcome()

    async def _write_record(self, action: WorkloadAction, value: str | None, *, on_read: bool = False) -> str:
        """The record patch; ``on_read``: only onto the version the decision was made on."""
        return await self.writer.set_annotation(
            KUEUE_API,
            "workloads",
            action.namespace,
            action.name,
            PLACEMENT_ANNOTATION,
            value,
            uid=action.uid,
            resource_version=action.resource_version if on_read else "",
        )

    async def _apply(self, action: WorkloadAction) -> Outcome:
        """One workload's writes, in order; the record is written before the check goes Ready (a crash
        in between is repaired from it) and dropped only after a release has been sent."""
        if not self.is_leader():
            return Outcome()
        release = action.kind in (ActionKind.RELEASE, ActionKind.REJECT)
        check = action.check
        try:
            version = check.resource_version if check is not None else ""
            if action.record is not None:
                version = await self._write_record(action, action.record.to_annotation(), on_read=True)
            elif action.drop_record and not release:
                version = await self._write_record(action, None) or version
            if check is not None:
                await self.writer.apply_check(
                    action.namespace,
                    action.name,
                    check.entries(),
                    uid=action.uid,
                    resource_version=version,
                )
            if action.drop_record and release:
                await self._write_record(action, None)
        except ApiError as exc:
            log.warning("%s %s failed (%s); retried next cycle", action.kind, action.key, exc)
            if exc.conflict:
                self.on_stale()
            return Outcome(errors=(f"{action.kind} {action.key}: {exc}",))
        if action.settles is not None:
            self.claims.settled(*action.settles)
        if action.kind not in (ActionKind.DEFER, ActionKind.WAIT_LAYOUT) and not self.options.dry_run:
            self.own.wrote(action.namespace, action.name, action.resource_version)
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
