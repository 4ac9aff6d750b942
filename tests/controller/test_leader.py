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
    expired = (held_by("b", NOW), 15.0)  # unchanged for the whole duration, on our own clock
    released = ({**held_by("b", NOW), "holderIdentity": ""}, 0.0)
    for spec, unchanged in (expired, released):
        step = next_lease(spec, "a", NOW, 15, unchanged_for=unchanged)
        assert step.action == "takeover" and step.spec is not None
        assert step.spec["holderIdentity"] == "a" and step.spec["leaseTransitions"] == 3


def test_a_renew_time_long_past_on_our_wall_clock_does_not_expire_a_lease_we_just_saw():
    step = next_lease(held_by("b", NOW - timedelta(hours=1)), "a", NOW, 15, unchanged_for=0.0)
    assert step.action == "wait"


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


def test_a_follower_whose_clock_runs_10s_ahead_does_not_take_over_early() -> None:
    """Expiry is counted on the follower's own monotonic clock from when it saw the Lease change."""
    ticks = [0.0]

    async def scenario() -> None:
        api = FakeLeases()
        lease = LeaseOptions("ns", "lease", duration_s=15)
        leader = LeaderElector(
            api, lease, "a", clock=lambda: NOW + timedelta(seconds=ticks[0]), monotonic=lambda: ticks[0]
        )
        skewed = LeaderElector(
            api, lease, "b", clock=lambda: NOW + timedelta(seconds=10 + ticks[0]), monotonic=lambda: ticks[0]
        )
        assert await leader.try_once() is True  # renewTime = NOW, by the leader's wall clock
        assert await skewed.try_once() is False  # the follower's wall clock reads NOW + 10 s
        ticks[0] = 6.0  # by its wall clock the Lease is 16 s old for the follower: not by its own count
        assert await skewed.try_once() is False and leader.is_leader
        assert await leader.try_once() is True  # renewed at 6 s
        ticks[0] = 7.0
        assert await skewed.try_once() is False  # sees the renewal: counts from 7 s
        ticks[0] = 21.9
        assert await skewed.try_once() is False
        assert not leader.is_leader  # it stopped acting at 6 + 0.8 * 15 = 18 s
        ticks[0] = 22.0  # 15 s unchanged since the follower saw the last renewal
        assert await skewed.try_once() is True
        assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "b"

    asyncio.run(scenario())


def test_after_a_release_a_handover_is_told_from_a_last_replica_stopping() -> None:
    async def scenario() -> tuple[bool, bool]:
        api = FakeLeases()
        lease = LeaseOptions("ns", "lease", duration_s=15)
        a = LeaderElector(api, lease, "a", clock=lambda: NOW)
        b = LeaderElector(api, lease, "b", clock=lambda: NOW)
        assert await a.try_once() is True
        await a.release()
        alone = await a.taken_over(0.05, poll_s=0.01)
        assert await b.try_once() is True
        return alone, await a.taken_over(0.05, poll_s=0.01)

    assert asyncio.run(scenario()) == (False, True)
