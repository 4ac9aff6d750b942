"""Leader election on a coordination.k8s.io Lease: two replicas, one acts.

The rule (:func:`next_lease`) is pure: given the Lease as read, who we are
and the time, it says whether to create, renew, take over or wait. The
writes carry the Lease's resourceVersion, so of two replicas racing for an
expired Lease exactly one wins (the other gets 409 and waits). A leader that
cannot renew within the lease duration stops acting before anyone else can
take over, because the other replica waits the full duration after the last
renewal it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from optsched.controller.clock import Clock, system_clock
from optsched.controller.options import LeaseOptions
from optsched.kube.client import ApiError, Client
from optsched.kueue.workload_status import parse_time

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


def next_lease(spec: dict[str, Any] | None, identity: str, now: datetime, duration_s: int) -> LeaseStep:
    """What to do with the Lease ``spec`` (None: the Lease does not exist)."""
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
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    held_for = spec.get("leaseDurationSeconds")
    held_for = held_for if isinstance(held_for, int) and held_for > 0 else duration_s
    expired = renewed is None or now >= renewed + timedelta(seconds=held_for)
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

    Lease times come from the injected ``clock``; how long a renewal stays
    valid is measured on the event loop's monotonic clock, which no clock
    change can move.
    """

    def __init__(
        self,
        client: Client,
        lease: LeaseOptions,
        identity: str,
        *,
        clock: Clock = system_clock,
    ) -> None:
        self.client = client
        self.lease = lease
        self.identity = identity
        self.clock = clock
        self._valid_until: float = 0.0
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return asyncio.get_running_loop().time() < self._valid_until

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
        started = asyncio.get_running_loop().time()
        was = self.is_leader
        try:
            lease = await self._read()
            spec = lease.get("spec") if lease else None
            step = next_lease(spec, self.identity, self.clock(), self.lease.duration_s)
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
