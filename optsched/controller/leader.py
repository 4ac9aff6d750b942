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
from typing import Any

from optsched.kueue.workload_status import parse_time

log = logging.getLogger("optsched.leader")

LEASE_API = "coordination.k8s.io/v1"
SAFETY = 0.8
"""A leader stops acting after this fraction of the lease duration without a renewal."""


def _micro(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseStep:
    action: str
    """``create``, ``renew``, ``takeover`` or ``wait``."""
    spec: dict[str, Any] | None = None
    """The Lease spec to write (None for ``wait``)."""


def next_lease(spec: dict[str, Any] | None, identity: str, now: datetime, duration_s: int) -> LeaseStep:
    """What to do with the Lease ``spec`` (None: the Lease does not exist)."""
    if spec is None:
        return LeaseStep(
            "create",
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
        return LeaseStep("renew", {**spec, "renewTime": _micro(now), "leaseDurationSeconds": duration_s})
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    held_for = spec.get("leaseDurationSeconds")
    held_for = held_for if isinstance(held_for, int) and held_for > 0 else duration_s
    expired = renewed is None or now >= renewed + timedelta(seconds=held_for)
    if not holder or expired:
        transitions = spec.get("leaseTransitions")
        return LeaseStep(
            "takeover",
            {
                "holderIdentity": identity,
                "leaseDurationSeconds": duration_s,
                "acquireTime": _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": (transitions if isinstance(transitions, int) else 0) + 1,
            },
        )
    return LeaseStep("wait")


class LeaderElector:
    """Keeps trying to hold the Lease; :attr:`is_leader` says whether this replica may act."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration_s: int = 15,
        renew_every_s: float = 5.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration_s = duration_s
        self.renew_every_s = renew_every_s
        self._valid_until: float = 0.0
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return asyncio.get_running_loop().time() < self._valid_until

    async def try_once(self) -> bool:
        """One acquire/renew attempt; True when we hold the Lease afterwards."""
        from optsched.kube.client import ApiError

        loop = asyncio.get_running_loop()
        started = loop.time()
        was = self.is_leader
        try:
            try:
                lease = await self.client.get(LEASE_API, "leases", self.name, namespace=self.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                lease = None
            step = next_lease(
                lease.get("spec") if lease else None, self.identity, datetime.now(UTC), self.duration_s
            )
            if step.action == "wait":
                self._valid_until = 0.0
            elif step.action == "create":
                await self.client.create(
                    LEASE_API,
                    "leases",
                    {
                        "apiVersion": LEASE_API,
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": step.spec,
                    },
                    namespace=self.namespace,
                )
                self._valid_until = started + self.duration_s * SAFETY
            else:
                assert lease is not None
                body = {**lease, "spec": step.spec}
                await self.client.replace(LEASE_API, "leases", self.name, body, namespace=self.namespace)
                self._valid_until = started + self.duration_s * SAFETY
        except ApiError as exc:
            if exc.conflict:
                self._valid_until = 0.0
            else:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        except Exception as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        now_leader = self.is_leader
        if now_leader != was:
            log.info(
                "%s leadership of lease %s/%s",
                "acquired" if now_leader else "lost",
                self.namespace,
                self.name,
            )
            self.changed.set()
        return now_leader

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.try_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.renew_every_s)

    async def release(self) -> None:
        """Give the Lease up on shutdown so the other replica takes over at once."""
        if not self.is_leader:
            return
        from optsched.kube.client import ApiError

        try:
            lease = await self.client.get(LEASE_API, "leases", self.name, namespace=self.namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") == self.identity:
                spec["holderIdentity"] = ""
                await self.client.replace(
                    LEASE_API, "leases", self.name, {**lease, "spec": spec}, namespace=self.namespace
                )
        except ApiError as exc:
            log.warning("releasing lease: %s", exc)
        self._valid_until = 0.0
