"""Every knob of ``optsched run`` has one default: the flags start from the options' own defaults."""

from __future__ import annotations

import argparse

import pytest

from optsched.commands.run import register_run, replica_from
from optsched.controller.options import LeaseOptions, MetricsOptions, Options, Replica, WebhookOptions
from optsched.settings import Settings


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register_run(parser.add_subparsers())
    return parser.parse_args(["run", *argv])


def test_no_flags_give_the_defaults_of_the_options(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    replica = replica_from(parse("--identity", "a"))
    assert replica == Replica(identity="a", webhook=WebhookOptions())
    assert replica.options == Options() and replica.settings == Settings()


def test_flags_reach_their_options() -> None:
    args = parse(
        "--identity=b",
        "--check-name=one",
        "--check-name=two",
        "--interval=3",
        "--hold-seconds=9",
        "--time-limit=2",
        "--leader-elect",
        "--lease-namespace=ns",
        "--lease-duration=6",
        "--webhook-port=9443",
    )
    replica = replica_from(args)
    assert replica.options.check_names == ("one", "two") and replica.options.interval == 3
    assert replica.options.policy.hold_seconds == 9 and replica.settings.time_limit_s == 2
    assert replica.lease == LeaseOptions(namespace="ns", name=LeaseOptions.name, duration_s=6)
    assert replica.lease.renew_every_s == 2
    assert replica.webhook.port == 9443 and replica.webhook.namespace == "ns"


def test_the_controller_can_plan_without_extended_resource_toleration() -> None:
    assert replica_from(parse("--identity", "a")).settings.extended_resource_toleration
    off = replica_from(parse("--identity", "a", "--no-extended-resource-toleration"))
    assert not off.settings.extended_resource_toleration


def test_metrics_are_secure_by_default_and_can_be_bound_to_localhost_in_plain_http() -> None:
    assert replica_from(parse("--identity", "a")).metrics == MetricsOptions(secure=True, port=9464)
    local = replica_from(
        parse("--identity=a", "--metrics-bind-address=127.0.0.1:8080", "--metrics-secure=false")
    )
    assert local.metrics == MetricsOptions(host="127.0.0.1", port=8080, secure=False)
    assert replica_from(parse("--identity=a", "--metrics-bind-address", ":8443")).metrics.port == 8443
    assert replica_from(parse("--identity=a", "--metrics-bind-address=0")).metrics.port == 0
    assert replica_from(parse("--identity=a", "--metrics-port=0")).metrics.port == 0
    assert replica_from(parse("--identity=a", "--request-timeout=5")).request_timeout == 5


@pytest.mark.parametrize("argv", [("--metrics-bind-address=localhost",), ("--metrics-secure=maybe",)])
def test_bad_metrics_flags_are_usage_errors(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse("--identity=a", *argv)
    assert caught.value.code == 2


def test_dra_claims_can_be_switched_off_and_the_orphan_grace_set() -> None:
    default = replica_from(parse("--identity", "a")).options
    assert default.dra_claims and default.policy.orphan_claim_seconds == 60
    off = replica_from(parse("--identity", "a", "--no-dra-claims", "--orphan-claim-seconds", "5")).options
    assert not off.dra_claims and off.policy.orphan_claim_seconds == 5
