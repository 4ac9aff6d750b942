"""Informers: LIST once, then WATCH; the cache follows every change, relists on 410 and broken streams."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from optsched.kube.client import Client
from optsched.kube.cluster_cache import ClusterCache, NotSynced
from optsched.kube.informer import Informer, Source, Timing
from optsched.kube.slim import slim_pod
from optsched.model.names import NODE_GPUS_API
from tests.kube.fake_server import FakeServer

FAST = Timing(page_size=2, backoff_s=0.01, max_backoff_s=0.05, rediscover_s=0.05)
GUARD_S = 20.0
NODES = Source("Node", "nodes", ("v1",))
PODS = Source("Pod", "pods", ("v1",), field_selector="status.phase!=Succeeded,status.phase!=Failed")


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }


def pod(name: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "trainer:1", "env": [{"name": "A", "value": "1"}]}],
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "c", "ready": True}]},
    }


async def eventually(check: Callable[[], bool], what: str) -> None:
    """Wait until ``check()`` holds (a guard ends a wait that never would, as a failure)."""
    async with asyncio.timeout(GUARD_S):
        while not check():
            await asyncio.sleep(0.005)


def running(
    server: FakeServer,
    source: Source,
    body: Callable[[Informer, list[dict[str, Any]]], Awaitable[None]],
    **kw: Any,
) -> list[dict[str, Any]]:
    """Run an informer on ``server`` while ``body`` drives it; the events it handed on."""
    events: list[dict[str, Any]] = []

    async def scenario() -> None:
        informer = Informer(Client(server), source, on_change=events.append, timing=FAST, **kw)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), GUARD_S)
            await body(informer, events)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    return events


def names(informer: Informer) -> list[str]:
    return sorted(o["metadata"]["name"] for o in informer.items())


def test_the_cache_follows_added_modified_and_deleted_after_one_list() -> None:
    server = FakeServer([node("n1"), node("n2"), node("n3")])

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        assert names(informer) == ["n1", "n2", "n3"]
        server.add(node("n4"))
        server.modify(node("n1", rack="r9"))
        server.delete(node("n2"))
        await eventually(lambda: names(informer) == ["n1", "n3", "n4"], "the changes")
        [n1] = [o for o in informer.items() if o["metadata"]["name"] == "n1"]
        assert n1["metadata"]["labels"] == {"rack": "r9"}

    events = running(server, NODES, body)
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert changes == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
        ("ADDED", "n3"),
        ("ADDED", "n4"),
        ("MODIFIED", "n1"),
        ("DELETED", "n2"),
    ]
    # Listed once, in pages of two; everything after came through the watch.
    assert server.lists("nodes") == 2


def test_cached_objects_carry_kind_and_api_version_and_no_managed_fields() -> None:
    server = FakeServer([node("n1")])

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        server.modify(node("n1", rack="r2"))
        await eventually(lambda: len(events) == 2, "the modification")

    events = running(server, NODES, body)
    for event in events:
        obj = event["object"]
        assert (obj["kind"], obj["apiVersion"]) == ("Node", "v1")
        assert "managedFields" not in obj["metadata"]


def test_410_gone_relists_and_hands_on_what_changed_meanwhile() -> None:
    server = FakeServer([node("n1"), node("n2")])

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        server.end_watches()  # the stream ends as at its timeoutSeconds; the watch resumes from n2's version
        server.delete(node("n1"))
        server.add(node("n3"))
        server.compact()  # ... which the server no longer has
        await eventually(lambda: informer.lists == 2 and names(informer) == ["n2", "n3"], "the relist")

    events = running(server, NODES, body)
    assert server.gone >= 1
    after = [(e["type"], e["object"]["metadata"]["name"]) for e in events[2:]]
    assert sorted(after) == [("ADDED", "n3"), ("DELETED", "n1")]


def test_a_broken_stream_is_listed_again_after_a_backoff() -> None:
    server = FakeServer([node("n1")])

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        server.break_watches()
        await eventually(lambda: informer.lists == 2, "the relist")
        server.add(node("n2"))
        await eventually(lambda: names(informer) == ["n1", "n2"], "the next watch")

    events = running(server, NODES, body)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
    ]


def test_a_pod_that_finishes_leaves_the_cache_as_deleted_and_pods_are_slim() -> None:
    server = FakeServer([pod("a"), pod("b"), pod("done", phase="Succeeded")])

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        assert names(informer) == ["a", "b"]
        server.modify(pod("a", phase="Failed"))
        await eventually(lambda: names(informer) == ["b"], "a leaving the selector")

    events = running(server, PODS, body, transform=slim_pod)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events][-1] == ("DELETED", "a")
    cached = events[1]["object"]
    assert cached["spec"]["containers"] == [{"name": "c"}]
    assert cached["status"] == {"phase": "Running"}


def test_a_kind_the_server_does_not_serve_is_synced_empty_with_a_note() -> None:
    server = FakeServer([node("n1")])
    source = Source("NodeGPUs", "nodegpus", (NODE_GPUS_API,))

    async def body(informer: Informer, events: list[dict[str, Any]]) -> None:
        assert informer.items() == [] and informer.note is not None and "not served" in informer.note

    assert running(server, source, body) == []


def test_caches_that_cannot_sync_name_themselves() -> None:
    class Down:
        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            raise httpx.ConnectError("connection refused")

    async def scenario() -> str:
        cache = ClusterCache(Client(Down()), timing=FAST)
        task = asyncio.create_task(cache.run())
        try:
            with pytest.raises(NotSynced) as caught:
                await cache.wait_synced(0.2)
            return str(caught.value)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    message = asyncio.run(scenario())
    assert message.startswith("caches not synced within 0.2s: nodes (cannot reach the API server")
