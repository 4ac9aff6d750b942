"""The loop over informers: cycles and pin passes read the caches, events wake them, state stays bounded."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from optsched import planning
from optsched.controller.health import Heartbeat
from optsched.controller.loop import Controller
from optsched.controller.options import Options
from optsched.kube.client import Client
from optsched.kube.informer import Timing
from optsched.kube.writer import Writer
from optsched.model.names import KUEUE_API, KUEUE_QUEUE_NAME_LABEL, NODE_GPUS_API
from optsched.settings import Settings
from tests.controller import objects as o
from tests.kube.fake import FakeCluster, FakeTransport
from tests.kube.fake_server import FakeServer
from tests.snapshot.raw import holding, node_gpus

SETTINGS = Settings(time_limit_s=5, workers=1)
FAST = Timing(backoff_s=0.01, max_backoff_s=0.05, rediscover_s=0.05)
GUARD_S = 30.0
RECORD = '{"planId":"p1","podSets":{"main":[{"index":0,"node":"n1","gpus":[0,1,2,3]}]},"flavors":{}}'


def optimizer(snapshot: Any) -> Any:
    return planning.plan(snapshot, SETTINGS, "optimizer")


def controller(client: Client, **kw: Any) -> Controller:
    return Controller(
        client,
        Options(dry_run=True, sync_timeout=GUARD_S),
        planner=kw.pop("planner", optimizer),
        writer=Writer(client, dry_run=True),
        clock=lambda: datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
        cache_timing=FAST,
        **kw,
    )


async def eventually(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(GUARD_S):
        while not check():
            await asyncio.sleep(0.005)


def with_informers(ctl: Controller, body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body`` while the controller's informers keep its caches current."""

    async def scenario() -> None:
        task = asyncio.create_task(ctl.cache.run())
        try:
            await body()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_cycles_read_the_caches_listed_once_and_see_what_the_watch_brought() -> None:
    server = FakeServer([*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=8)])
    ctl = controller(Client(server))

    async def body() -> None:
        first = await ctl.cycle()
        assert [a.key for a in first.decisions.of_kind("admit")] == ["default/a"]
        server.add(o.workload("b", count=1, gpus=8))
        await eventually(lambda: len(ctl.cache.of_kind("Workload")) == 2)
        second = await ctl.cycle()
        assert first.errors == second.errors == ()
        assert {a.key for a in second.decisions.actions} >= {"default/b"}

    with_informers(ctl, body)
    # One list per kind for both cycles: the second read came from the watch, not another LIST.
    assert server.lists("workloads") == 1 and server.lists("pods") == 1 and server.lists("nodes") == 1


def test_the_pods_read_are_ours_those_of_kueue_queues_and_those_holding_our_gate() -> None:
    queued = o.pod("queued", plan_id=None, gated=False)
    queued["metadata"]["labels"][KUEUE_QUEUE_NAME_LABEL] = "team"
    other = o.pod("other", plan_id=None, gated=False, node="n1", phase="Running")
    pods = [o.pod("ours", plan_id="p1", gated=False), o.pod("gated", plan_id=None), queued, other]
    ctl = controller(Client(FakeTransport(FakeCluster([*o.base_objects(o.node("n1")), *pods]))))
    read = asyncio.run(ctl.read())
    assert sorted(p["metadata"]["name"] for p in read.pods) == ["gated", "ours", "queued"]
    # The snapshot's objects hold every pod that holds capacity (bound or gated), whoever owns it.
    in_objects = sorted(p["metadata"]["name"] for p in read.objects if p["kind"] == "Pod")
    assert in_objects == ["gated", "other"]


def test_events_from_the_caches_wake_cycles_and_pin_passes() -> None:
    server = FakeServer(o.base_objects(o.node("n1")))
    ctl = controller(Client(server))

    async def body() -> None:
        await ctl.cache.wait_synced(GUARD_S)
        ctl.trigger.clear()
        ctl.pin_trigger.clear()
        server.add(o.pod("a-0", plan_id="p1"))
        await eventually(ctl.pin_trigger.is_set)
        assert not ctl.trigger.is_set()
        server.add(o.workload("a", count=1, gpus=4))
        await eventually(ctl.trigger.is_set)

    with_informers(ctl, body)


def test_a_node_deleted_while_the_stream_was_down_is_forgotten_by_the_node_filter() -> None:
    server = FakeServer(o.base_objects(o.node("n1"), o.node("n2")))
    ctl = controller(Client(server))

    async def body() -> None:
        await ctl.cache.wait_synced(GUARD_S)
        assert set(ctl.triggers.nodes.seen) == {"n1", "n2"}
        server.break_watches()
        server.delete(o.node("n2"))
        await eventually(lambda: set(ctl.triggers.nodes.seen) == {"n1"})

    with_informers(ctl, body)


def test_the_pin_pass_pins_from_the_caches_without_listing() -> None:
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=1, gpus=4, check="Ready", admitted=True, record=RECORD),
    ]
    server = FakeServer(objects)
    ctl = controller(Client(server))

    async def body() -> None:
        await ctl.cache.wait_synced(GUARD_S)
        lists = len(server.requests)
        server.add(o.pod("a-0", plan_id="p1", index=0))
        await eventually(lambda: len(ctl.cache.pods()) == 1)
        assert await ctl.pin_pass() == 1
        assert [r for r in server.requests[lists:] if r.url.params.get("watch") != "true"] == []

    with_informers(ctl, body)
    assert [w.target for w in ctl.writer.sent] == ["pods/default/a-0"]


PREDICTED = (
    '{"planId":"p1","plannedAt":0,"podSets":{"main":['
    '{"index":0,"node":"n1","gpus":[0,1],"enforcement":"predicted","nodeOrder":0},'
    '{"index":1,"node":"n1","gpus":[2,3],"enforcement":"predicted","nodeOrder":1}]},"flavors":{}}'
)


def test_the_pin_pass_keeps_a_node_busy_until_its_agent_lists_the_bound_predicted_pod() -> None:
    pinned = {"optsched.io/pinned-at": "2026-01-01T00:00:50Z"}
    first = o.pod("a-0", plan_id="p1", index=0, pinned_index=0, gated=False, node="n1", annotations=pinned)
    objects = [
        *o.base_objects(o.node("n1")),
        o.workload("a", count=2, gpus=2, check="Ready", admitted=True, record=PREDICTED),
        node_gpus("n1"),
        first,
    ]
    server = FakeServer(objects, served=(KUEUE_API, NODE_GPUS_API))
    ctl = controller(Client(server))

    async def body() -> None:
        await ctl.cache.wait_synced(GUARD_S)
        server.add(o.pod("a-1", plan_id="p1", index=1))
        await eventually(lambda: len(ctl.cache.pods()) == 2)
        assert await ctl.pin_pass() == 0, "a-0 is bound but its devices are not read back yet"
        listed = node_gpus("n1", pods=[holding("n1", "a-0", 0, 1, namespace="default")])
        ctl.pin_trigger.clear()
        server.add(listed)
        await eventually(ctl.pin_trigger.is_set)  # the read-back wakes a pin pass
        await eventually(lambda: bool(ctl.cache.of_kind("NodeGPUs")[0]["status"].get("pods")))
        assert await ctl.pin_pass() == 1

    with_informers(ctl, body)
    assert [w.target for w in ctl.writer.sent] == ["pods/default/a-1"]


def test_a_cycle_leaves_the_cached_objects_as_they_were() -> None:
    objects = [
        *o.base_objects(o.node("n1"), o.node("bad", topology="[[")),
        o.workload("a", count=1, gpus=4, check="Ready", admitted=True, record=RECORD),
        o.workload("b", count=1, gpus=4),
        o.pod("a-0", plan_id="p1", index=0),
    ]
    ctl = controller(Client(FakeServer(objects)))

    async def body() -> None:
        await ctl.cache.wait_synced(GUARD_S)
        before = copy.deepcopy(ctl.cache.objects() + ctl.cache.pods())
        result = await ctl.cycle()
        assert result.errors == () and result.plan is not None and result.pinned == 1
        assert ctl.cache.objects() + ctl.cache.pods() == before

    with_informers(ctl, body)


def test_reported_problems_are_remembered_only_while_they_last() -> None:
    cluster = FakeCluster([*o.base_objects(o.node("n1"), o.node("bad", topology="[["))])
    ctl = controller(Client(FakeTransport(cluster)))

    def events() -> int:
        return len([w for w in ctl.writer.sent if w.target.startswith("events/")])

    asyncio.run(ctl.cycle())
    asyncio.run(ctl.cycle())
    assert events() == 1 and len(ctl._reported) == 1
    cluster.objects = [*o.base_objects(o.node("n1"))]  # fixed
    asyncio.run(ctl.cycle())
    assert ctl._reported == set()
    cluster.objects = [*o.base_objects(o.node("n1"), o.node("bad", topology="[["))]  # broken again
    asyncio.run(ctl.cycle())
    assert events() == 2


def test_a_hung_cycle_turns_healthz_red_and_a_finished_one_green_again() -> None:
    now = [0.0]
    heartbeat = Heartbeat(60.0, clock=lambda: now[0])
    entered, release = threading.Event(), threading.Event()

    def blocking(snapshot: Any) -> Any:
        entered.set()
        release.wait(GUARD_S)
        return optimizer(snapshot)

    server = FakeServer([*o.base_objects(o.node("n1")), o.workload("a", count=1, gpus=8)])
    ctl = controller(Client(server), planner=blocking, heartbeat=heartbeat)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(ctl.run(stop))
        try:
            await eventually(entered.is_set)
            assert heartbeat.health().healthy
            now[0] += 61.0  # the cycle has hung for longer than the bound
            health = heartbeat.health()
            assert not health.healthy and "no progress for 61s" in health.message
            release.set()
            await eventually(lambda: heartbeat.health().healthy)
        finally:
            release.set()
            stop.set()
            ctl.trigger.set()
            await asyncio.wait_for(task, GUARD_S)

    asyncio.run(scenario())
