"""``optsched snapshot`` writes what ``plan --snapshot`` replays; ``plan --kubeconfig`` plans it."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import yaml

import optsched.kube.reader
from optsched.kube.reader import Listing
from optsched.snapshot.documents import read_documents
from tests.cli.conftest import FAST, SMALL


@functools.cache
def _example_objects() -> tuple[dict[str, Any], ...]:
    return tuple(read_documents(SMALL))


@pytest.fixture
def live_cluster(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A stand-in for the API server that returns the objects of the small example."""
    objects = [dict(o) for o in _example_objects()]

    def fetch(kubeconfig: str | None, namespace: str | None = None, **kwargs: Any) -> Listing:
        return Listing(objects, ("AdmissionCheck: not served (404)",))

    monkeypatch.setattr(optsched.kube.reader, "fetch_snapshot_objects", fetch)
    return objects


def test_snapshot_writes_a_list_that_plan_replays(run_cli, live_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "snap.yaml"
    result = run_cli("snapshot", "--out", str(target))
    assert result.code == 0
    assert f"wrote {len(live_cluster)} objects" in result.err
    assert "warning: AdmissionCheck: not served" in result.err
    document = yaml.safe_load(target.read_text())
    assert document["apiVersion"] == "v1" and document["kind"] == "List"
    assert len(document["items"]) == len(live_cluster)

    replayed = json.loads(run_cli("plan", "--snapshot", str(target), "--format", "json", *FAST).out)
    original = json.loads(run_cli("plan", "--snapshot", str(SMALL), "--format", "json", *FAST).out)
    assert replayed["workloads"] == original["workloads"]


def test_plan_from_a_live_cluster(run_cli, live_cluster) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("plan", "--kubeconfig", "--format", "json", *FAST)
    assert result.code == 0
    assert json.loads(result.out)["workloads"]


def test_snapshot_to_an_unwritable_path_exits_2(run_cli, live_cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "missing-dir" / "snap.yaml"
    result = run_cli("snapshot", "--out", str(target))
    assert result.code == 2
    assert str(target) in result.err and "cannot write" in result.err
