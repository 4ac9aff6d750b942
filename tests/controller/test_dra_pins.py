"""DRA mode at ungate time: the pin carries its claim, the claim goes in before the pod is ungated, and a
kill between the two loses nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from optsched.controller.act import Actor
from optsched.controller.claims import indexed_claim_name
from optsched.controller.metrics import Metrics
from optsched.controller.options import Options
from optsched.controller.pinning import PodPin, pins_for
from optsched.controller.views import read_pod, read_workload
from optsched.kube.client import ApiError
from optsched.kueue.placement_record import PlacementRecord, plan_id_of
from optsched.model.names import GPU_UUIDS_ANNOTATION, POD_CLAIM_NAME
from optsched.model.placement import Enforcement, PodPlacement
from tests.controller import objects as o

SLOTS = [
    PodPlacement(
        index=i,
        node="n1",
        gpus=(2 * i, 2 * i + 1),
        gpu_uuids=(f"GPU-{i}a", f"GPU-{i}b"),
        enforcement=Enforcement.DRA,
    )
    for i in range(2)
]


def _views(record: str) -> dict[tuple[str, str], Any]:
    raw = o.workload("wl", check="Ready", record=record, count=2, uid="wl-uid", owner="job-uid")
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"] = [
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    ]
    view = read_workload(raw, ["optsched"], spec=False)
    assert view.record is not None
    return {(view.namespace, view.record.plan_id): view}


def _dra_pod(plan_id: str, index: int, uid: str) -> dict[str, Any]:
    raw = o.pod(f"wl-{index}", plan_id=plan_id, index=index, owner="job-uid")
    raw["metadata"]["uid"] = uid
    name = indexed_claim_name("default", plan_id, "main", index)
    raw["spec"]["resourceClaims"] = [{"name": POD_CLAIM_NAME, "resourceClaimName": name}]
    raw["spec"]["containers"] = [
        {"name": "train", "resources": {"claims": [{"name": POD_CLAIM_NAME, "request": "gpus-0"}]}}
    ]
    return raw


def _pins() -> tuple[PodPin, ...]:
    plan_id = plan_id_of("wl-uid", [("main", SLOTS)])
    record = PlacementRecord(plan_id=plan_id, pod_sets={"main": tuple(SLOTS)}).to_annotation()
    records = _views(record)
    pods = [read_pod(_dra_pod(plan_id, i, f"pod-{i}")) for i in range(2)]
    assert [k[1] for k in records] == [plan_id]
    return pins_for(pods, records).pins


def test_a_pod_naming_its_claim_is_pinned_with_the_claim_of_its_slot_and_the_uuids() -> None:
    pins = _pins()
    assert [p.slot.index for p in pins] == [0, 1]
    first = pins[0]
    assert first.claim is not None and first.enforcement == Enforcement.DRA
    body = first.claim.body()
    assert body["metadata"]["ownerReferences"][0]["uid"] == "pod-0"
    (request,) = body["spec"]["devices"]["requests"]
    assert (
        request["exactly"]["count"] == 2
        and '"GPU-0a", "GPU-0b"' in request["exactly"]["selectors"][0]["cel"]["expression"]
    )
    assert first.patch()["metadata"]["annotations"][GPU_UUIDS_ANNOTATION] == "GPU-0a,GPU-0b"


class ClaimCluster:
    """Claims, pods and pins the way the API server keeps them; ``die_on_pin`` kills the next pin."""

    def __init__(self) -> None:
        self.client = self
        self.claims: dict[str, dict[str, Any]] = {}
        self.pins: list[str] = []
        self.deleted: list[str] = []
        self.die_on_pin = False

    async def create_new(self, api_version: str, plural: str, body: dict[str, Any], **kw: Any) -> bool:
        name = body["metadata"]["name"]
        if name in self.claims:
            return False
        self.claims[name] = {**body, "metadata": {**body["metadata"], "uid": f"claim-{len(self.claims)}"}}
        return True

    async def get(self, api_version: str, plural: str, name: str, **kw: Any) -> dict[str, Any]:
        if plural == "resourceclaims" and name in self.claims:
            return self.claims[name]
        raise ApiError(404, f"{plural} {name} not found")

    async def delete(self, api_version: str, plural: str, name: str, **kw: Any) -> None:
        self.deleted.append(name)
        self.claims.pop(name, None)

    async def patch_pod(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        if self.die_on_pin:
            self.die_on_pin = False
            raise ApiError(0, "controller killed")
        self.pins.append(name)


def _actor(cluster: ClaimCluster) -> Actor:
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    return Actor(cluster, Metrics(), Options(), is_leader=lambda: True, clock=clock)  # type: ignore[arg-type]


def test_a_kill_between_claim_and_ungate_loses_nothing_and_claims_nothing_twice() -> None:
    cluster = ClaimCluster()
    pins = _pins()
    cluster.die_on_pin = True
    asyncio.run(_actor(cluster).pin(pins[:1]))
    assert list(cluster.claims) == [pins[0].claim.name] and cluster.pins == []  # type: ignore[union-attr]
    restarted = _actor(cluster)  # a new leader: nothing in memory
    outcome = asyncio.run(restarted.pin(pins))
    assert outcome.pinned == 2 and cluster.pins == ["wl-0", "wl-1"]
    assert len(cluster.claims) == 2 and cluster.deleted == []


def test_a_claim_of_that_name_not_this_slots_is_deleted_and_the_pod_waits() -> None:
    cluster = ClaimCluster()
    pins = _pins()
    stale = pins[0].claim.body()  # type: ignore[union-attr]
    stale["metadata"]["ownerReferences"][0]["uid"] = "an-older-pod"
    cluster.claims[stale["metadata"]["name"]] = stale
    actor = _actor(cluster)
    now = [100.0]
    actor.backoff.clock = lambda: now[0]
    assert asyncio.run(actor.pin(pins[:1])).pinned == 0
    assert cluster.deleted == [stale["metadata"]["name"]] and cluster.pins == []
    assert asyncio.run(actor.pin(pins[:1])).pinned == 0, "held: not tried again before its delay"
    now[0] += 60
    assert asyncio.run(actor.pin(pins[:1])).pinned == 1
    assert actor.metrics.claim_conflicts.labels("delete")._value.get() == 1


def test_a_claim_allocated_to_another_live_owner_is_a_conflict_the_workload_is_replanned_for() -> None:
    cluster = ClaimCluster()
    pins = _pins()
    taken = pins[0].claim.body()  # type: ignore[union-attr]
    taken["metadata"]["ownerReferences"][0].update({"uid": "tenant-pod", "kind": "ResourceClaimTemplate"})
    taken["status"] = {"allocation": {"devices": {"results": [{"device": "gpu-7"}]}}}
    cluster.claims[taken["metadata"]["name"]] = taken
    actor = _actor(cluster)
    assert asyncio.run(actor.pin(pins[:1])).pinned == 0
    assert cluster.pins == [] and cluster.deleted == []
    assert ("default", pins[0].plan_id) in actor.claims.conflicts


def test_a_claim_still_being_deleted_is_not_read_again_before_its_delay() -> None:
    cluster = ClaimCluster()
    pins = _pins()
    dying = pins[0].claim.body()  # type: ignore[union-attr]
    dying["metadata"]["ownerReferences"][0]["uid"] = "a-terminating-pod"
    dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cluster.claims[dying["metadata"]["name"]] = dying
    reads: list[str] = []
    get = cluster.get

    async def counted(api_version: str, plural: str, name: str, **kw: Any) -> dict[str, Any]:
        reads.append(plural)
        return await get(api_version, plural, name, **kw)

    cluster.get = counted  # type: ignore[method-assign]
    woken: list[int] = []
    actor = _actor(cluster)
    actor.on_conflict = lambda: woken.append(1)
    for _ in range(5):
        assert asyncio.run(actor.pin(pins[:1])).pinned == 0
    assert reads.count("resourceclaims") == 1 and woken == [], "one read, and no pin pass woken at once"


def test_a_conflict_is_forgotten_once_a_claim_of_its_plan_is_made() -> None:
    cluster = ClaimCluster()
    pins = _pins()
    actor = _actor(cluster)
    actor.claims.conflicts[("default", pins[0].plan_id)] = "slot main/0 cannot be enforced"
    assert asyncio.run(actor.pin(pins[:1])).pinned == 1
    assert actor.claims.conflicts == {}
