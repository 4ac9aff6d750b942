"""optsched's ResourceClaims whose pod is gone are found after a grace period and deleted, once a live read
confirms the pod is gone, with the claim's uid as a precondition; claims of others and of live pods stay."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from optsched.controller.act import Actor
from optsched.controller.claim_sweep import OwnedClaim, orphans, owned_claims
from optsched.controller.decide import decide
from optsched.controller.inputs import build_input
from optsched.controller.metrics import Metrics
from optsched.controller.options import DeferPolicy, Options
from optsched.kube.client import ApiError
from optsched.model.names import CLAIM_PLAN_LABEL
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def _claim(
    name: str = "optsched-abc-0",
    *,
    owner_uid: str | None = "uid-pod-gone",
    created: str = "2026-01-01T00:00:00Z",
    label: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"claim-{name}",
        "creationTimestamp": created,
        "labels": {CLAIM_PLAN_LABEL: "v2-p"} if label else {},
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "gone", "uid": owner_uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:09:00Z"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": {}}


def _sweeps(*claims: dict[str, Any], pods: tuple[dict[str, Any], ...] = (), grace: int = 60) -> list[str]:
    inp = build_input([*o.base_objects(o.node("n1")), *claims], ["optsched"], pods=pods)
    out = decide(inp, None, now=NOW, policy=DeferPolicy(orphan_claim_seconds=grace))
    return [c.key for c in out.sweeps]


def test_a_claim_whose_owner_pod_is_gone_is_swept_after_the_grace_period() -> None:
    assert _sweeps(_claim()) == ["default/optsched-abc-0"]
    assert _sweeps(_claim(created="2026-01-01T00:09:30Z")) == [], "younger than the grace period"
    assert _sweeps(_claim(created="2026-01-01T00:09:30Z"), grace=10) == ["default/optsched-abc-0"]


def test_a_claim_of_a_pod_that_exists_finished_or_not_stays() -> None:
    live = o.pod("p", plan_id="v2-p", uid="uid-pod-gone")
    done = o.pod("p", plan_id="v2-p", uid="uid-pod-gone", gated=False, node="n1", phase="Succeeded")
    assert _sweeps(_claim(), pods=(live,)) == []
    assert _sweeps(_claim(), pods=(done,)) == []


def test_only_optsched_claims_not_being_deleted_are_swept_and_one_without_owner_is() -> None:
    assert _sweeps(_claim("someone-elses")) == []
    assert _sweeps(_claim(label=False)) == [], "an optsched- name without our plan label is not ours"
    assert _sweeps(_claim(deleting=True)) == []
    assert _sweeps(_claim(owner_uid=None)) == ["default/optsched-abc-0"]


def test_a_claim_without_a_creation_time_is_never_swept() -> None:
    raw = _claim()
    del raw["metadata"]["creationTimestamp"]
    assert orphans(owned_claims([raw]), [], now=NOW, grace_seconds=0) == ()


class Api:
    """Pods and claims as the API server has them; ``delete`` honours the uid precondition."""

    def __init__(self, pods: dict[str, str], claims: dict[str, str]) -> None:
        self.client = self
        self.pods, self.claims = pods, claims
        self.deleted: list[str] = []

    async def get(self, api_version: str, plural: str, name: str, **kw: Any) -> dict[str, Any]:
        if plural == "pods" and name in self.pods:
            return {"metadata": {"name": name, "namespace": "default", "uid": self.pods[name]}}
        raise ApiError(404, f"{plural} {name} not found")

    async def delete(self, api_version: str, plural: str, name: str, *, uid: str = "", **kw: Any) -> None:
        if self.claims.get(name) != uid:
            raise ApiError(409, "precondition failed: uid")
        self.deleted.append(name)
        del self.claims[name]


def _sweep(api: Api, claims: list[OwnedClaim]) -> Actor:
    actor = Actor(api, Metrics(), Options(), is_leader=lambda: True, clock=lambda: NOW)  # type: ignore[arg-type]
    for claim in claims:
        asyncio.run(actor._sweep(claim))
    return actor


def test_the_writer_deletes_with_the_uid_once_the_pod_is_confirmed_gone_and_counts_it() -> None:
    [claim] = owned_claims([_claim()])
    api = Api(pods={}, claims={claim.name: claim.uid})
    actor = _sweep(api, [claim])
    assert api.deleted == [claim.name]
    assert actor.metrics.claims_swept._value.get() == 1


def test_the_writer_keeps_a_claim_whose_pod_the_informer_had_not_delivered_or_replaced_since() -> None:
    [claim] = owned_claims([_claim()])
    late = Api(pods={"gone": "uid-pod-gone"}, claims={claim.name: claim.uid})
    assert late.deleted == [] and _sweep(late, [claim]).metrics.claims_swept._value.get() == 0
    replaced = Api(pods={}, claims={claim.name: "a-newer-claim"})
    assert _sweep(replaced, [claim]).metrics.claims_swept._value.get() == 0
    assert replaced.claims == {claim.name: "a-newer-claim"}
