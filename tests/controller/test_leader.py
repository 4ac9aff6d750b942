from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta

from optsched.controller.leader import LeaderElector, next_lease
from optsched.controller.options import LeaseOptions

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def held_by(holder: str, renewed: datetime, transitions: int = 2) -> dict:
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "renewTime": stamp(renewed),
        "acquireTime": stamp(renewed),
        "leaseTransitions": transitions,
    }


def test_missing_lease_is_created_by_us():
    step = next_lease(None, "a", NOW, 15)
    assert step.action == "create" and step.spec is not None and step.spec["holderIdentity"] == "a"


def test_own_lease_is_renewed():
    step = next_lease(held_by("a", NOW - timedelta(seconds=5)), "a", NOW, 15)
    assert step.action == "renew" and step.spec is not None
    assert step.spec["renewTime"] == stamp(NOW) and step.spec["leaseTransitions"] == 2


def test_live_lease_of_another_replica_makes_us_wait():
    assert next_lease(held_by("b", NOW - timedelta(seconds=14)), "a", NOW, 15).action == "wait"


def test_expired_or_released_lease_is_taken_over():
    for spec in (held_by("b", NOW - timedelta(seconds=16)), {**held_by("b", NOW), "holderIdentity": ""}):
        step = next_lease(spec, "a", NOW, 15)
        assert step.action == "takeover" and step.spec is not None
        assert step.spec["holderIdentity"] == "a" and step.spec["leaseTransitions"] == 3


class FakeLeases:
    """An in-memory API holding one Lease, with resourceVersion conflicts like the API server."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.version = 0

    async def get(self, api_version, plural, name, *, namespace=None):
        from optsched.kube.client import ApiError

        if self.lease is None:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.lease)

    async def create(self, api_version, plural, body, *, namespace=None):
        from optsched.kube.client import ApiError

        if self.lease is not None:
            raise ApiError(409, "exists")
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return self.lease

    async def replace(self, api_version, plural, name, body, *, namespace=None):
        from optsched.kube.client import ApiError

        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "conflict")
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return self.lease


def test_two_replicas_one_leader_and_takeover_after_release():
    async def scenario():
        api = FakeLeases()
        lease = LeaseOptions("ns", "lease", duration_s=15)
        a = LeaderElector(api, lease, "a", clock=lambda: NOW)
        b = LeaderElector(api, lease, "b", clock=lambda: NOW)
        assert await a.try_once() is True
        assert await b.try_once() is False
        assert await a.try_once() is True
        assert (a.is_leader, b.is_leader) == (True, False)
        await a.release()
        assert await b.try_once() is True
        assert await a.try_once() is False
        return api.lease["spec"]

    spec = asyncio.run(scenario())
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_lease_times_come_from_the_injected_clock() -> None:
    async def scenario() -> dict:
        api = FakeLeases()
        elector = LeaderElector(api, LeaseOptions("ns", "lease"), "a", clock=lambda: NOW)
        assert await elector.try_once() is True
        return api.lease["spec"]

    spec = asyncio.run(scenario())
    assert spec["renewTime"] == stamp(NOW) and spec["acquireTime"] == stamp(NOW)
    assert spec["leaseDurationSeconds"] == LeaseOptions.duration_s
