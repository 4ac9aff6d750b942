"""Every controller write, as the API server receives it; dry-run sends nothing."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import httpx

from optsched.kube.client import APPLY_PATCH, MERGE_PATCH, Client
from optsched.kube.writer import Writer
from optsched.model.events import Event
from tests.kube.fake import FakeTransport, status


def writer(answer: httpx.Response | None = None, *, dry_run: bool = False) -> tuple[Writer, FakeTransport]:
    transport = FakeTransport(lambda request: answer or httpx.Response(200, json={}))
    return Writer(Client(transport), dry_run=dry_run), transport


def test_our_check_entry_is_applied_server_side_on_the_status_with_force() -> None:
    w, transport = writer()
    asyncio.run(w.apply_check("ml", "job", {"name": "optsched", "state": "Ready"}))
    [request] = transport.requests
    assert request.url.path.endswith("/namespaces/ml/workloads/job/status")
    assert request.headers["Content-Type"] == APPLY_PATCH
    assert dict(request.url.params) == {"fieldManager": "optsched", "force": "true"}
    assert json.loads(request.content)["status"]["admissionChecks"] == [
        {"name": "optsched", "state": "Ready"}
    ]


def test_the_record_annotation_carries_the_uid_as_a_precondition() -> None:
    w, transport = writer()
    asyncio.run(w.set_annotation("kueue.x-k8s.io/v1beta2", "workloads", "ml", "job", "k", "v", uid="u1"))
    [request] = transport.requests
    assert request.headers["Content-Type"] == MERGE_PATCH
    assert json.loads(request.content) == {"metadata": {"annotations": {"k": "v"}, "uid": "u1"}}


def test_an_event_is_stamped_with_the_callers_time() -> None:
    w, transport = writer()
    at = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    asyncio.run(
        w.event(
            Event(
                kind="Node",
                api_version="v1",
                namespace="",
                name="n1",
                uid="u",
                reason="InvalidNode",
                message="m",
            ),
            at=at,
        )
    )
    body = json.loads(transport.requests[0].content)
    assert transport.requests[0].url.path == "/api/v1/namespaces/default/events"
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-01-01T12:00:00Z"
    assert body["reason"] == "InvalidNode" and "namespace" not in body["involvedObject"]


def test_create_leaves_an_existing_object_as_it_is() -> None:
    w, _ = writer(status(409, "already exists"))
    asyncio.run(w.create("v1", "secrets", {"metadata": {"name": "s"}}, namespace="ml"))
    assert [s.verb for s in w.sent] == ["create"]


def test_dry_run_keeps_every_write_and_sends_none() -> None:
    w, transport = writer(dry_run=True)
    asyncio.run(w.patch_pod("ml", "p", {"spec": {}}))
    assert transport.requests == [] and [(s.verb, s.target) for s in w.sent] == [("merge-patch", "pods/ml/p")]
