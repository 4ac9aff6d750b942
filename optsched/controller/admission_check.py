"""Keeping our AdmissionChecks Active: a reconciler of its own, apart from the Workload cycle.

Kueue does not reserve quota on a ClusterQueue whose admission checks are
not Active, so our checks must be Active before any workload can reach us.
This is reconciled at start-up, on AdmissionCheck watch events that concern
our checks, after a change of leadership, and every ``checks_every`` seconds
in case a watch event was missed; never once per Workload cycle. What to do
(:func:`plan_checks`) is pure; the reconciler only lists and writes.

When the last replica stops cleanly (it led, and no other replica took the
Lease over), our checks are set ``Active=False`` (:meth:`AdmissionCheckReconciler.withdraw`,
best effort): Kueue then stops reserving quota for ClusterQueues that need a
controller no longer running, instead of letting their workloads wait on it
silently. The next replica to lead sets them Active again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from optsched.controller.clock import Clock, system_clock
from optsched.controller.options import Options
from optsched.kube.client import ApiError, Client
from optsched.kube.writer import Writer
from optsched.kueue import workload_status as ks
from optsched.model.names import KUEUE_API

log = logging.getLogger("optsched.controller")


@dataclass(frozen=True)
class CheckView:
    """One AdmissionCheck as read."""

    name: str
    controller: str
    active: bool
    generation: int = 1


def read_check(obj: Mapping[str, Any]) -> CheckView:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    generation = ks.meta(obj).get("generation")
    return CheckView(
        name=str(ks.meta(obj).get("name", "")),
        controller=str((spec or {}).get("controllerName", "")),
        active=ks.condition_true(obj, "Active"),
        generation=generation if isinstance(generation, int) else 1,
    )


@dataclass(frozen=True)
class CheckPlan:
    """What one reconcile writes."""

    create: tuple[str, ...] = ()
    """Checks we serve that do not exist (created, then set Active)."""
    activate: tuple[CheckView, ...] = ()
    """Checks of our controller that are not Active yet."""
    foreign: tuple[CheckView, ...] = ()
    """Checks we were told to serve that belong to another controller (left alone, logged)."""


def plan_checks(checks: Iterable[CheckView], options: Options) -> CheckPlan:
    """Create the checks we serve that are missing; make every check of our controller Active."""
    existing = {c.name: c for c in checks}
    wanted = options.check_names
    create = tuple(n for n in wanted if n not in existing) if options.create_check else ()
    return CheckPlan(
        create=create,
        activate=(
            *(c for c in existing.values() if c.controller == options.controller_name and not c.active),
            *(CheckView(n, options.controller_name, active=False) for n in create),
        ),
        foreign=tuple(
            existing[n] for n in wanted if n in existing and existing[n].controller != options.controller_name
        ),
    )


def check_object(name: str, controller_name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller_name},
    }


def active_status(check: CheckView, now: datetime, *, active: bool = True) -> dict[str, Any]:
    """Server-side apply body: the ``Active`` condition, for the check's current generation."""
    condition = {
        "type": "Active",
        "status": "True" if active else "False",
        "reason": "Active" if active else "ControllerStopped",
        "lastTransitionTime": ks.format_time(now),
        "message": "optsched is running" if active else "no optsched replica is running",
        "observedGeneration": check.generation,
    }
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": check.name},
        "status": {"conditions": [condition]},
    }


def concerns_us(event: Mapping[str, Any], options: Options) -> bool:
    """An AdmissionCheck event worth a reconcile: one of ours, deleted or not Active."""
    check = read_check(event.get("object") or {})
    ours = check.name in options.check_names or check.controller == options.controller_name
    return ours and (event.get("type") == "DELETED" or not check.active)


class AdmissionCheckReconciler:
    """Lists the AdmissionChecks and writes what :func:`plan_checks` says, when woken or periodically."""

    def __init__(
        self,
        client: Client,
        writer: Writer,
        options: Options,
        *,
        is_leader: Callable[[], bool],
        clock: Clock = system_clock,
    ) -> None:
        self.client = client
        self.writer = writer
        self.options = options
        self.is_leader = is_leader
        self.clock = clock
        self.wanted = asyncio.Event()
        """Set when a reconcile is due before the next period."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        if concerns_us(event, self.options):
            self.wanted.set()

    async def reconcile(self) -> None:
        """One pass; only the leader writes, and a failed list waits for the next pass."""
        if not self.is_leader():
            return
        try:
            checks = [read_check(c) for c in await self.client.list(KUEUE_API, "admissionchecks")]
        except ApiError as exc:
            log.warning("cannot list AdmissionChecks: %s", exc)
            return
        plan = plan_checks(checks, self.options)
        for check in plan.foreign:
            log.warning(
                "AdmissionCheck %s belongs to controller %s, not %s",
                check.name,
                check.controller,
                self.options.controller_name,
            )
        try:
            for name in plan.create:
                body = check_object(name, self.options.controller_name)
                await self.writer.create(KUEUE_API, "admissionchecks", body)
            now = self.clock()
            for check in plan.activate:
                body = active_status(check, now)
                await self.writer.apply(KUEUE_API, "admissionchecks", check.name, body, subresource="status")
        except ApiError as exc:
            log.warning("cannot make our AdmissionChecks Active: %s", exc)

    async def withdraw(self) -> int:
        """Set every Active check of our controller ``Active=False``; how many were (best effort)."""
        try:
            checks = [read_check(c) for c in await self.client.list(KUEUE_API, "admissionchecks")]
            ours = [c for c in checks if c.controller == self.options.controller_name and c.active]
            now = self.clock()
            for check in ours:
                body = active_status(check, now, active=False)
                await self.writer.apply(KUEUE_API, "admissionchecks", check.name, body, subresource="status")
        except ApiError as exc:
            log.warning("cannot set our AdmissionChecks inactive: %s", exc)
            return 0
        for check in ours:
            log.info("AdmissionCheck %s set inactive: no replica is left to serve it", check.name)
        return len(ours)

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile now, then whenever :attr:`wanted` is set or ``checks_every`` seconds pass."""
        while not stop.is_set():
            self.wanted.clear()
            await self.reconcile()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wanted.wait(), timeout=self.options.checks_every)
