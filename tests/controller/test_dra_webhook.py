"""The webhook in DRA mode: pods naming optsched's claims are refused; pods on DRA slots get their claim."""

from __future__ import annotations

import base64
import json
from typing import Any

from optsched.controller.claims import indexed_claim_name
from optsched.controller.webhook import DraFacts, mutate
from optsched.kueue.managed_queues import ManagedQueues
from optsched.kueue.placement_record import PlacementRecord
from optsched.model.names import COMPLETION_INDEX_LABEL, PLAN_ID_LABEL, PODSET_LABEL, SCHEDULING_GATE
from optsched.model.placement import Enforcement, PodPlacement


def _slot(index: int, *, dra: bool = True, node: str = "n1") -> PodPlacement:
    uuids = (f"GPU-{index}a", f"GPU-{index}b")
    return PodPlacement(
        index=index,
        node=node,
        gpus=(0, 1),
        gpu_uuids=uuids,
        enforcement=Enforcement.DRA if dra else Enforcement.PREDICTED,
    )


RECORD = PlacementRecord(plan_id="v2-p", pod_sets={"workers": (_slot(0), _slot(1))})
MIXED = PlacementRecord(plan_id="v2-m", pod_sets={"workers": (_slot(0), _slot(1, dra=False))})


def _facts(templates: dict[str, int] | None = None) -> DraFacts:
    records = {("ns", r.plan_id): r for r in (RECORD, MIXED)}
    return DraFacts(
        records=lambda ns, plan: records.get((ns, plan)),
        templates=lambda ns, name: (templates or {}).get(name),
    )


def _review(pod: dict[str, Any], uid: str = "req-1") -> dict[str, Any]:
    request = {
        "uid": uid,
        "operation": "CREATE",
        "namespace": "ns",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": pod,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _pod(plan: str | None = "v2-p", index: int | None = 1, **spec: Any) -> dict[str, Any]:
    labels = {PLAN_ID_LABEL: plan, PODSET_LABEL: "workers"} if plan else {}
    if index is not None:
        labels[COMPLETION_INDEX_LABEL] = str(index)
    containers = [
        {"name": "side", "resources": {"limits": {"cpu": "1"}}},
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
    ]
    return {"metadata": {"name": "job-1", "labels": labels}, "spec": {"containers": containers, **spec}}


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    raw = answer["response"].get("patch")
    return json.loads(base64.b64decode(raw)) if raw else []


def _ops(answer: dict[str, Any]) -> dict[str, Any]:
    return {op["path"]: op["value"] for op in _patch(answer)}


def test_a_pod_naming_an_optsched_claim_is_refused_whatever_its_queue() -> None:
    stolen = [{"name": "gpus", "resourceClaimName": indexed_claim_name("ns", "v2-p", "workers", 0)}]
    answer = mutate(_review(_pod(plan=None, index=None, resourceClaims=stolen)), ManagedQueues(), _facts())
    response = answer["response"]
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "ns/job-1" in message and stolen[0]["resourceClaimName"] in message
    assert "only optsched names claims" in message


def test_a_pod_naming_a_sibling_slots_claim_is_refused_even_with_the_plan_id() -> None:
    sibling = [{"name": "optsched-gpus", "resourceClaimName": indexed_claim_name("ns", "v2-p", "workers", 0)}]
    answer = mutate(_review(_pod(index=1, resourceClaims=sibling)), ManagedQueues(), _facts())
    assert answer["response"]["allowed"] is False


def test_an_indexed_pod_on_a_dra_slot_gets_its_claim_and_loses_nvidia_gpu() -> None:
    answer = mutate(_review(_pod(index=1)), ManagedQueues(), _facts())
    assert answer["response"]["allowed"] is True
    ops = _ops(answer)
    name = indexed_claim_name("ns", "v2-p", "workers", 1)
    assert ops["/spec/resourceClaims"] == [{"name": "optsched-gpus", "resourceClaimName": name}]
    side, train = ops["/spec/containers"]
    assert side == {"name": "side", "resources": {"limits": {"cpu": "1"}}}
    assert train["resources"] == {
        "limits": {"cpu": "4"},
        "claims": [{"name": "optsched-gpus", "request": "gpus-1"}],
    }
    assert ops["/spec/schedulingGates"] == [{"name": SCHEDULING_GATE}]


def test_the_webhook_reinvoked_on_its_own_pod_allows_it_unchanged_but_gated() -> None:
    first = mutate(_review(_pod(index=1)), ManagedQueues(), _facts())
    converted = _pod(index=1)
    for op in _patch(first):
        converted["spec"][op["path"].split("/")[-1]] = op["value"]
    again = mutate(_review(converted, uid="req-2"), ManagedQueues(), _facts())
    assert again["response"]["allowed"] is True
    assert _patch(again) == []


def test_a_slot_on_a_device_plugin_node_gets_no_claim() -> None:
    answer = mutate(_review(_pod(plan="v2-m", index=1)), ManagedQueues(), _facts())
    assert set(_ops(answer)) == {"/spec/schedulingGates"}
    dra = mutate(_review(_pod(plan="v2-m", index=0)), ManagedQueues(), _facts())
    assert "/spec/resourceClaims" in _ops(dra)


def test_a_non_indexed_pod_gets_a_unique_claim_only_when_every_slot_is_on_dra() -> None:
    one = _ops(mutate(_review(_pod(index=None), uid="a"), ManagedQueues(), _facts()))
    two = _ops(mutate(_review(_pod(index=None), uid="b"), ManagedQueues(), _facts()))
    first, second = (o["/spec/resourceClaims"][0]["resourceClaimName"] for o in (one, two))
    stem = indexed_claim_name("ns", "v2-p", "workers", 0)[:-1]
    assert first != second and first.startswith(stem + "u") and second.startswith(stem + "u")
    mixed = _ops(mutate(_review(_pod(plan="v2-m", index=None)), ManagedQueues(), _facts()))
    assert "/spec/resourceClaims" not in mixed


def test_an_unknown_record_fails_open_with_a_warning() -> None:
    answer = mutate(_review(_pod(plan="v2-unknown")), ManagedQueues(), _facts())
    assert answer["response"]["allowed"] is True
    assert set(_ops(answer)) == {"/spec/schedulingGates"}
    assert "node-pinned only" in answer["response"]["warnings"][0]


def test_a_gpu_template_entry_is_moved_onto_the_claim_and_other_entries_stay() -> None:
    claims = [
        {"name": "gpu", "resourceClaimTemplateName": "two-gpus"},
        {"name": "nic", "resourceClaimTemplateName": "rdma"},
    ]
    pod = _pod(index=0, resourceClaims=claims)
    pod["spec"]["containers"][1]["resources"] = {"claims": [{"name": "gpu"}, {"name": "nic"}]}
    ops = _ops(mutate(_review(pod), ManagedQueues(), _facts({"two-gpus": 2})))
    name = indexed_claim_name("ns", "v2-p", "workers", 0)
    assert ops["/spec/resourceClaims"] == [claims[1], {"name": "optsched-gpus", "resourceClaimName": name}]
    assert ops["/spec/containers"][1]["resources"]["claims"] == [
        {"name": "nic"},
        {"name": "optsched-gpus", "request": "gpus-1"},
    ]


def test_with_dra_claims_off_no_pod_gets_a_claim_but_pods_naming_ours_are_still_refused() -> None:
    off = DraFacts(records=_facts().records, templates=_facts().templates, claims=False)
    ops = _ops(mutate(_review(_pod(index=1)), ManagedQueues(), off))
    assert "/spec/resourceClaims" not in ops and "/spec/containers" not in ops
    assert ops["/spec/schedulingGates"] == [{"name": SCHEDULING_GATE}], "still gated: node-pinned only"
    stolen = [{"name": "x", "resourceClaimName": indexed_claim_name("ns", "v2-p", "workers", 0)}]
    refused = mutate(_review(_pod(plan=None, index=None, resourceClaims=stolen)), ManagedQueues(), off)
    assert refused["response"]["allowed"] is False
