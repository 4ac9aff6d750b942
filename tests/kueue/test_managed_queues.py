"""Which LocalQueues lead to a ClusterQueue that requires our admission check."""

from __future__ import annotations

from typing import Any

from optsched.kueue.managed_queues import managed_local_queues


def _cq(name: str, checks: list[str] | None = None, strategy: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if checks is not None:
        spec["admissionChecks"] = checks
    if strategy is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in strategy]}
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _lq(namespace: str, name: str, cq: Any) -> dict[str, Any]:
    return {
        "kind": "LocalQueue",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterQueue": cq},
    }


def test_verdict_is_true_for_ours_false_for_others_and_none_when_unknown() -> None:
    objects = [
        _cq("gpu", checks=["optsched"]),
        _cq("cpu", checks=["provisioning"]),
        _cq("strategy", strategy=["optsched"]),
        _lq("team-a", "gpu", "gpu"),
        _lq("team-a", "cpu", "cpu"),
        _lq("team-b", "s", "strategy"),
        _lq("team-b", "dangling", "missing"),
        _lq("team-b", "broken", 7),
    ]
    queues = managed_local_queues(objects, ["optsched"])
    assert queues.verdict("team-a", "gpu") is True
    assert queues.verdict("team-a", "cpu") is False
    assert queues.verdict("team-b", "s") is True
    assert queues.verdict("team-b", "dangling") is None
    assert queues.verdict("team-b", "broken") is None
    assert queues.verdict("team-c", "gpu") is None


def test_malformed_check_lists_read_as_no_checks() -> None:
    cq = {"kind": "ClusterQueue", "metadata": {"name": "x"}, "spec": {"admissionChecks": "optsched"}}
    queues = managed_local_queues([cq, _lq("ns", "q", "x")], ["optsched"])
    assert queues.verdict("ns", "q") is False
