"""The webhook's view of which LocalQueues optsched decides: read from the API, kept, refreshed."""

from __future__ import annotations

import asyncio

import httpx

from optsched.controller.queue_verdicts import QueueVerdicts
from optsched.kube.client import Client
from tests.kube.fake import FakeCluster, FakeTransport, status


def cluster_queue(name, checks=()):
    spec = {"admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]}}
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace, name, cq):
    metadata = {"namespace": namespace, "name": name}
    return {"kind": "LocalQueue", "metadata": metadata, "spec": {"clusterQueue": cq}}


OBJECTS = [
    cluster_queue("gpu", ["optsched"]),
    cluster_queue("cpu", ["other-check"]),
    local_queue("team", "train", "gpu"),
    local_queue("team", "batch", "cpu"),
]


def test_nothing_is_known_before_the_first_read_and_everything_listed_after_it():
    verdicts = QueueVerdicts(Client(FakeTransport(FakeCluster(OBJECTS))), ["optsched"])
    assert verdicts.current().verdict("team", "train") is None and verdicts.reads == 0
    asyncio.run(verdicts.refresh())
    assert verdicts.current().verdict("team", "train") is True
    assert verdicts.current().verdict("team", "batch") is False
    assert verdicts.current().verdict("team", "unknown") is None


def test_a_failed_read_keeps_the_last_verdicts():
    fake = FakeCluster(OBJECTS)
    failing = [False]

    def handler(request):
        return status(500, "etcd is down") if failing[0] else fake(request)

    verdicts = QueueVerdicts(Client(FakeTransport(handler)), ["optsched"])
    asyncio.run(verdicts.refresh())
    failing[0] = True

    async def scenario():
        stop = asyncio.Event()
        task = asyncio.create_task(verdicts.run(stop))
        await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(scenario())
    assert verdicts.current().verdict("team", "train") is True


def test_run_picks_up_a_queue_that_becomes_ours():
    fake = FakeCluster(OBJECTS)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch"):
            return httpx.Response(200, content=b"")  # a watch that ends at once: only the resync is left
        return fake(request)

    verdicts = QueueVerdicts(Client(FakeTransport(handler)), ["optsched"], resync_s=0.01, settle_s=0)

    async def scenario():
        stop = asyncio.Event()
        task = asyncio.create_task(verdicts.run(stop))
        for _ in range(500):
            if verdicts.reads:
                break
            await asyncio.sleep(0.01)
        assert verdicts.current().verdict("team", "batch") is False
        fake.objects[1] = cluster_queue("cpu", ["optsched"])
        for _ in range(500):
            if verdicts.current().verdict("team", "batch"):
                break
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(scenario())
    assert verdicts.current().verdict("team", "batch") is True
