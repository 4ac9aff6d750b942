"""A clean shutdown of the last replica sets our AdmissionChecks Active=False; a handover leaves them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from optsched.controller.admission_check import AdmissionCheckReconciler
from optsched.controller.leader import LeaderElector
from optsched.controller.options import LeaseOptions, Options
from optsched.controller.replica import _withdraw_if_last
from optsched.kube.client import Client
from optsched.kube.writer import Writer
from tests.controller.test_admission_check import check
from tests.controller.test_leader import FakeLeases
from tests.kube.fake import FakeCluster, FakeTransport

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def reconciler(*checks: dict[str, Any]) -> AdmissionCheckReconciler:
    client = Client(FakeTransport(FakeCluster(checks)))
    return AdmissionCheckReconciler(
        client, Writer(client, dry_run=True), Options(), is_leader=lambda: True, clock=lambda: NOW
    )


def test_withdraw_sets_only_our_active_checks_inactive() -> None:
    checks = reconciler(
        check("optsched", active=True), check("idle"), check("theirs", "other.io/x", active=True)
    )
    assert asyncio.run(checks.withdraw()) == 1
    [write] = checks.writer.sent
    assert (write.verb, write.target) == ("apply", "admissionchecks/optsched/status")
    [condition] = write.body["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Active",
        "False",
        "ControllerStopped",
    )
    assert condition["observedGeneration"] == 3


def shutdown(*, other_takes_over: bool) -> list[Any]:
    checks = reconciler(check("optsched", active=True))

    async def scenario() -> None:
        api = FakeLeases()
        lease = LeaseOptions("ns", "lease", duration_s=3)  # the other replica tries every second
        leaving = LeaderElector(api, lease, "a", clock=lambda: NOW)
        other = LeaderElector(api, lease, "b", clock=lambda: NOW)
        assert await leaving.try_once()
        await leaving.release()
        if other_takes_over:
            assert await other.try_once()
        await _withdraw_if_last(SimpleNamespace(checks=checks), leaving)

    asyncio.run(scenario())
    return checks.writer.sent


def test_the_last_replica_leaving_withdraws_our_checks() -> None:
    assert [w.target for w in shutdown(other_takes_over=False)] == ["admissionchecks/optsched/status"]


def test_a_replica_handing_over_leaves_our_checks_active() -> None:
    assert shutdown(other_takes_over=True) == []


def test_a_starting_replica_waits_out_an_api_server_that_does_not_answer_yet(monkeypatch) -> None:
    import asyncio as aio

    from optsched.controller import replica as replica_module
    from optsched.controller.options import Replica
    from optsched.kube.client import Client, Unreachable

    calls: list[int] = []

    async def connect(kubeconfig, *, request_timeout):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) < 3:
            raise Unreachable("cannot reach the API server: 500 Internal Server Error", source="kc")
        return "client"

    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(Client, "connect", staticmethod(connect))
    monkeypatch.setattr(replica_module.asyncio, "sleep", no_sleep)
    got = aio.run(replica_module._connect("kc", Replica(identity="r")))
    assert got == "client" and len(calls) == 3


def test_a_kubeconfig_that_cannot_be_used_fails_at_once(monkeypatch) -> None:
    import asyncio as aio

    import pytest

    from optsched.controller import replica as replica_module
    from optsched.controller.options import Replica
    from optsched.errors import InputError
    from optsched.kube.client import Client

    async def connect(kubeconfig, *, request_timeout):  # type: ignore[no-untyped-def]
        raise InputError("cannot load kubeconfig: bad", source="kc")

    monkeypatch.setattr(Client, "connect", staticmethod(connect))
    with pytest.raises(InputError, match="cannot load kubeconfig"):
        aio.run(replica_module._connect("kc", Replica(identity="r")))
