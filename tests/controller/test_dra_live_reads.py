"""The webhook's live reads on an index miss: one list per namespace, shared by the pods arriving
meanwhile."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from optsched.controller.dra_index import DraIndex, LiveFacts
from optsched.kube.client import ApiError
from optsched.kueue.placement_record import PlacementRecord
from optsched.model.names import PLACEMENT_ANNOTATION
from optsched.model.placement import PodPlacement


class _Client:
    def __init__(self, fail: bool = False) -> None:
        self.lists = 0
        self.fail = fail

    async def list(self, api_version: str, plural: str, *, namespace: str | None = None) -> list[Any]:
        self.lists += 1
        await asyncio.sleep(0.05)
        if self.fail:
            raise ApiError(503, "unavailable")
        record = PlacementRecord(plan_id="v2-p", pod_sets={"w": (PodPlacement(index=0, node="n1"),)})
        meta = {
            "name": "wl",
            "namespace": namespace,
            "annotations": {PLACEMENT_ANNOTATION: record.to_annotation()},
        }
        return [{"kind": "Workload", "metadata": meta}]


def _run(client: _Client, asks: list[tuple[str, str]]) -> list[Any]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        facts = LiveFacts(DraIndex(), client, loop)  # type: ignore[arg-type]
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda a: facts.record(*a), asks))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_many_pods_missing_the_index_at_once_cost_one_list_of_their_namespace() -> None:
    client = _Client()
    found = _run(client, [("ns", "v2-p")] * 20 + [("ns", "v2-absent")] * 5)
    assert client.lists == 1
    assert all(r is not None and r.plan_id == "v2-p" for r in found[:20]) and found[20:] == [None] * 5


def test_a_failed_list_fails_open_for_every_pod_and_is_not_repeated_by_each() -> None:
    client = _Client(fail=True)
    assert _run(client, [("ns", "v2-p")] * 10) == [None] * 10
    assert client.lists == 1
