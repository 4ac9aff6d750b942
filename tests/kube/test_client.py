"""The one transport: how requests are built, how answers map to ApiError, lists and watch lines."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from optsched.kube.client import APPLY_PATCH, ApiError, Client
from optsched.model.names import KUEUE_API
from tests.kube.fake import FakeTransport, status


def client_answering(*answers: httpx.Response | Exception) -> tuple[Client, FakeTransport]:
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    transport = FakeTransport(handler)
    return Client(transport, source="kc.yaml"), transport


def test_patch_builds_the_status_subresource_request_with_field_manager_and_force() -> None:
    client, transport = client_answering(httpx.Response(200, json={"ok": True}))
    body = {"status": {"admissionChecks": [{"name": "optsched", "state": "Ready"}]}}
    answer = asyncio.run(
        client.patch(
            KUEUE_API,
            "workloads",
            "w",
            body,
            content_type=APPLY_PATCH,
            namespace="ml",
            subresource="status",
            field_manager="optsched",
            force=True,
        )
    )
    [request] = transport.requests
    assert answer == {"ok": True}
    assert request.method == "PATCH"
    assert request.url.path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/w/status"
    assert dict(request.url.params) == {"fieldManager": "optsched", "force": "true"}
    assert request.headers["Content-Type"] == APPLY_PATCH
    assert json.loads(request.content) == body


def test_core_objects_live_under_api_and_cluster_scoped_ones_have_no_namespace() -> None:
    client, transport = client_answering(httpx.Response(200, json={}), httpx.Response(200, content=b""))
    asyncio.run(client.get("v1", "pods", "p", namespace="ml"))
    assert asyncio.run(client.get(KUEUE_API, "admissionchecks", "optsched")) == {}
    assert [r.url.path for r in transport.requests] == [
        "/api/v1/namespaces/ml/pods/p",
        "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/optsched",
    ]


@pytest.mark.parametrize(
    ("answer", "code", "conflict", "not_found"),
    [
        (status(409, "the object has been modified"), 409, True, False),
        (status(404, 'pods "p" not found'), 404, False, True),
        (status(403, "forbidden"), 403, False, False),
    ],
)
def test_error_statuses_become_api_errors_with_the_servers_message(
    answer: httpx.Response, code: int, conflict: bool, not_found: bool
) -> None:
    client, _ = client_answering(answer)
    with pytest.raises(ApiError) as caught:
        asyncio.run(client.replace("v1", "pods", "p", {"metadata": {}}, namespace="ml"))
    error = caught.value
    assert (error.status, error.conflict, error.not_found) == (code, conflict, not_found)
    assert error.message == answer.json()["message"]
    assert str(error).startswith(f"HTTP {code}: ")


def test_an_error_without_a_status_body_keeps_the_transports_words() -> None:
    client, _ = client_answering(httpx.Response(500, content=b"<html>oops</html>"))
    with pytest.raises(ApiError) as caught:
        asyncio.run(client.get("v1", "nodes", "n1"))
    assert caught.value.status == 500 and "500" in caught.value.message


def test_no_answer_at_all_is_an_unreachable_api_error() -> None:
    client, _ = client_answering(httpx.ConnectError("connection refused"))
    with pytest.raises(ApiError) as caught:
        asyncio.run(client.list("v1", "nodes"))
    assert caught.value.unreachable and "cannot reach the API server: connection refused" in str(caught.value)


def test_other_exceptions_are_not_taken_for_api_answers() -> None:
    client, _ = client_answering(RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(client.list("v1", "nodes"))


def test_list_returns_the_items_and_sends_the_selectors() -> None:
    items: list[Any] = [{"metadata": {"name": "a"}}, "not an object", {"metadata": {"name": "b"}}]
    client, transport = client_answering(httpx.Response(200, json={"items": items}))
    got = asyncio.run(client.list("v1", "pods", label_selector="optsched.io/plan-id", field_selector="x=y"))
    assert [i["metadata"]["name"] for i in got] == ["a", "b"]
    assert dict(transport.requests[0].url.params) == {
        "labelSelector": "optsched.io/plan-id",
        "fieldSelector": "x=y",
    }


def test_create_posts_the_object_with_the_field_manager() -> None:
    client, transport = client_answering(httpx.Response(201, json={"metadata": {"name": "l"}}))
    asyncio.run(client.create("v1", "events", {"kind": "Event"}, namespace="ml", field_manager="optsched"))
    [request] = transport.requests
    assert (request.method, request.url.path) == ("POST", "/api/v1/namespaces/ml/events")
    assert request.url.params["fieldManager"] == "optsched"


def test_watch_starts_at_the_listed_version_and_yields_each_event_line() -> None:
    lines = [
        json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a"}}}),
        "",
        "not json",
        json.dumps(["not", "an", "event"]),
        json.dumps({"type": "DELETED", "object": {"metadata": {"name": "a"}}}),
    ]
    client, transport = client_answering(
        httpx.Response(200, json={"metadata": {"resourceVersion": "42"}, "items": []}),
        httpx.Response(200, content="\n".join(lines).encode()),
    )

    async def collect() -> list[dict[str, Any]]:
        return [e async for e in client.watch("v1", "pods", label_selector="optsched.io/plan-id")]

    events = asyncio.run(collect())
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    first, second = transport.requests
    assert dict(first.url.params) == {"limit": "1", "labelSelector": "optsched.io/plan-id"}
    assert second.url.params["watch"] == "true" and second.url.params["resourceVersion"] == "42"
    assert second.url.params["labelSelector"] == "optsched.io/plan-id"
    assert transport.streamed == [False, True]


def test_a_refused_watch_is_an_api_error() -> None:
    client, _ = client_answering(httpx.Response(200, json={}), status(410, "too old resource version"))

    async def collect() -> list[dict[str, Any]]:
        return [e async for e in client.watch("v1", "pods")]

    with pytest.raises(ApiError) as caught:
        asyncio.run(collect())
    assert caught.value.status == 410
