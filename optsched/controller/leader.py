"""Leader election on a coordination.k8s.io Lease: two replicas, one acts.

The rule (:func:`next_lease`) is pure: given the Lease as read, who we are,
the time and how long the Lease has looked the same to us, it says whether
to create, renew, take over or wait. The writes carry the Lease's
resourceVersion, so of two replicas racing for an expired Lease exactly one
wins (the other gets 409 and waits).

Expiry is judged on the follower's own monotonic clock, as client-go does
with its observed time: a holder's Lease has expired once the follower has
seen its record (holder, renewTime, resourceVersion) unchanged for the whole
lease duration, counted from the moment the follower first saw that record.
The follower never compares its wall clock with the ``renewTime`` the leader
wrote with its own, so clock skew between nodes cannot cause an early
takeover. A leader that cannot renew stops acting after
:data:`SAFETY` of the duration, measured on its own monotonic clock from
before its last successful renewal, so it has stopped before any follower can
count a full duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from optsched.controller.clock import Clock, system_clock
from optsched.controller.options import LeaseOptions
from optsched.kube.client import ApiError, Client

log = logging.getLogger("optsched.leader")

LEASE_API = "coordination.k8s.io/v1"
SAFETY = 0.8
"""A leader stops acting after this fraction of the lease duration without a renewal."""


def _micro(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseAction(StrEnum):
    CREATE = "create"
    RENEW = "renew"
    TAKEOVER = "takeover"
    WAIT = "wait"


@dataclass(frozen=True)
class LeaseStep:
    action: LeaseAction
    spec: dict[str, Any] | None = None
    """The Lease spec to write (None for ``wait``)."""


def next_lease(
    spec: dict[str, Any] | None,
    identity: str,
    now: datetime,
    duration_s: int,
    *,
    unchanged_for: float = 0.0,
) -> LeaseStep:
    """What to do with the Lease ``spec`` (None: the Lease does not exist).

    ``now`` only stamps what we write. ``unchanged_for`` is how long, on our
    own monotonic clock, the Lease's record has looked the same to us (0 when
    we have just seen it change, or see it for the first time): another
    holder's Lease has expired once that reaches its ``leaseDurationSeconds``.
    """
    if spec is None:
        return LeaseStep(
            LeaseAction.CREATE,
            {
                "holderIdentity": identity,
                "leaseDurationSeconds": duration_s,
                "acquireTime": _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": 0,
            },
        )
    holder = spec.get("holderIdentity") or ""
    if holder == identity:
        return LeaseStep(
            LeaseAction.RENEW, {**spec, "renewTime": _micro(now), "leaseDurationSeconds": duration_s}
        )
    held_for = spec.get("leaseDurationSeconds")
    held_for = held_for if isinstance(held_for, int) and held_for > 0 else duration_s
    expired = unchanged_for >= held_for
    if not holder or expired:
        transitions = spec.get("leaseTransitions")
        return LeaseStep(
            LeaseAction.TAKEOVER,
            {
                "holderIdentity": identity,
                "leaseDurationSeconds": duration_s,
                "acquireTime": _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": (transitions if isinstance(transitions, int) else 0) + 1,
            },
        )
    return LeaseStep(LeaseAction.WAIT)


class LeaderElector:
    """Keeps trying to hold the Lease; :attr:`is_leader` says whether this replica may act.

    The times written in the Lease come from the injected ``clock``; how long
    a renewal stays valid, and how long another holder's record has stayed
    the same, are measured on ``monotonic`` (the event loop's clock unless
    given), which no clock change or skew can move.
    """

    def __init__(
        self,
        client: Client,
        lease: LeaseOptions,
        identity: str,
        *,
        clock: Clock = system_clock,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.lease = lease
        self.identity = identity
        self.clock = clock
        self._monotonic = monotonic or (lambda: asyncio.get_running_loop().time())
        self._valid_until: float = 0.0
        self._observed: tuple[str, ...] | None = None
        """The Lease record as last seen: holder, renewTime, acquireTime, resourceVersion."""
        self._observed_at: float = 0.0
        """When (on ``monotonic``) we first saw that record."""
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self._monotonic() < self._valid_until

    def _unchanged_for(self, lease: dict[str, Any] | None) -> float:
        """How long the Lease has looked the same to us; 0 when it just changed (or was first seen)."""
        spec = (lease or {}).get("spec") or {}
        meta = (lease or {}).get("metadata") or {}
        record = tuple(
            str(value or "")
            for value in (
                spec.get("holderIdentity"),
                spec.get("renewTime"),
                spec.get("acquireTime"),
                meta.get("resourceVersion"),
            )
        )
        now = self._monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        return now - self._observed_at

    async def _read(self) -> dict[str, Any] | None:
        try:
            return await self.client.get(LEASE_API, "leases", self.lease.name, namespace=self.lease.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _write(self, spec: dict[str, Any] | None, lease: dict[str, Any] | None) -> None:
        """Create the Lease, or replace the one read (the replace carries its resourceVersion)."""
        where = {"namespace": self.lease.namespace}
        if lease is None:
            body = {
                "apiVersion": LEASE_API,
                "kind": "Lease",
                "metadata": {"name": self.lease.name, **where},
                "spec": spec,
            }
            await self.client.create(LEASE_API, "leases", body, **where)
        else:
            body = {**lease, "spec": spec}
            await self.client.replace(LEASE_API, "leases", self.lease.name, body, **where)

    async def try_once(self) -> bool:
        """One acquire/renew attempt; True when we hold the Lease afterwards."""
        started = self._monotonic()
        was = self.is_leader
        try:
            lease = await self._read()
            spec = lease.get("spec") if lease else None
            unchanged = self._unchanged_for(lease)
            step = next_lease(
                spec, self.identity, self.clock(), self.lease.duration_s, unchanged_for=unchanged
            )
            if step.action == LeaseAction.WAIT:
                self._valid_until = 0.0
            else:
                await self._write(step.spec, None if step.action == LeaseAction.CREATE else lease)
                self._valid_until = started + self.lease.duration_s * SAFETY
        except ApiError as exc:
            if exc.conflict:
                self._valid_until = 0.0
            else:
                log.warning("lease %s/%s: %s", self.lease.namespace, self.lease.name, exc)
        except Exception as exc:
            log.warning("lease %s/%s: %s", self.lease.namespace, self.lease.name, exc)
        if self.is_leader != was:
            log.info(
                "%s leadership of lease %s/%s",
                "acquired" if self.is_leader else "lost",
                self.lease.namespace,
                self.lease.name,
            )
            self.changed.set()
        return self.is_leader

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.try_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.lease.renew_every_s)

    async def release(self) -> None:
        """Give the Lease up on shutdown so the other replica takes over at once."""
        if not self.is_leader:
            return
        try:
            lease = await self._read()
            spec = dict((lease or {}).get("spec") or {})
            if lease is not None and spec.get("holderIdentity") == self.identity:
                await self._write({**spec, "holderIdentity": ""}, lease)
        except ApiError as exc:
            log.warning("releasing lease: %s", exc)
        self._valid_until = 0.0

    async def taken_over(self, within_s: float, *, poll_s: float = 0.5) -> bool:
        """After :meth:`release`: does another replica take the Lease within ``within_s`` seconds?

        The other replica tries every ``renew_every_s`` seconds, so waiting a
        little longer than that tells a handover from a last replica stopping.
        An unreadable Lease counts as not taken over.
        """
        deadline = self._monotonic() + within_s
        while True:
            try:
                lease = await self._read()
            except ApiError:
                lease = None
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
            if holder and holder != self.identity:
                return True
            if self._monotonic() >= deadline:
                return False
            await asyncio.sleep(poll_s)
