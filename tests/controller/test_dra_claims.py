"""DRA mode, pure rules: claim names, what a pod asks, the claim made from a slot, and what to do with one
that exists."""

from __future__ import annotations

from typing import Any

from optsched.controller.claims import (
    ClaimPlan,
    ClaimVerdict,
    GpuRequest,
    gpu_requests,
    indexed_claim_name,
    judge,
    requests_for,
    template_gpu_request,
    unindexed_claim_name,
)
from optsched.model.names import CLAIM_PLAN_LABEL, CLAIM_SLOT_ANNOTATION
from optsched.model.placement import Enforcement, PodPlacement

SLOT = PodPlacement(
    index=3, node="n1", gpus=(0, 1, 2), gpu_uuids=("GPU-a", "GPU-b", "GPU-c"), enforcement=Enforcement.DRA
)


def _plan(requests: tuple[GpuRequest, ...], slot: PodPlacement = SLOT, uid: str = "pod-uid") -> ClaimPlan:
    return ClaimPlan(
        name="optsched-x-3",
        namespace="team",
        plan_id="v2-abc",
        pod_set="workers",
        slot=slot,
        requests=requests,
        pod_name="job-3",
        pod_uid=uid,
    )


def test_an_indexed_claim_name_is_the_same_on_every_call_and_differs_by_each_part() -> None:
    name = indexed_claim_name("team", "v2-abc", "workers", 3)
    assert name == indexed_claim_name("team", "v2-abc", "workers", 3)
    assert name.startswith("optsched-") and name.endswith("-3")
    others = {
        indexed_claim_name("other", "v2-abc", "workers", 3),
        indexed_claim_name("team", "v2-def", "workers", 3),
        indexed_claim_name("team", "v2-abc", "leader", 3),
        indexed_claim_name("team", "v2-abc", "workers", 4),
    }
    assert name not in others and len(others) == 4


def test_an_unindexed_claim_name_shares_the_stem_and_is_unique_per_request() -> None:
    one = unindexed_claim_name("team", "v2-abc", "workers", "req-1")
    assert one == unindexed_claim_name("team", "v2-abc", "workers", "req-1")
    assert one != unindexed_claim_name("team", "v2-abc", "workers", "req-2")
    stem = indexed_claim_name("team", "v2-abc", "workers", 0)[:-1]
    assert one.startswith(stem + "u")


def test_the_claim_selects_each_containers_planned_uuids_and_is_owned_by_the_pod() -> None:
    body = _plan((GpuRequest("a", 2, "gpus-0"), GpuRequest("c", 1, "gpus-2"))).body()
    meta = body["metadata"]
    assert body["apiVersion"] == "resource.k8s.io/v1" and body["kind"] == "ResourceClaim"
    assert meta["labels"] == {CLAIM_PLAN_LABEL: "v2-abc"}
    assert meta["annotations"] == {CLAIM_SLOT_ANNOTATION: "workers/3"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "job-3",
            "uid": "pod-uid",
            "controller": True,
        }
    ]
    first, second = body["spec"]["devices"]["requests"]
    assert first["name"] == "gpus-0" and second["name"] == "gpus-2"
    assert first["exactly"]["count"] == 2 and first["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert first["exactly"]["allocationMode"] == "ExactCount"
    assert first["exactly"]["selectors"] == [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].uuid in ["GPU-a", "GPU-b"]'}}
    ]
    assert second["exactly"]["selectors"][0]["cel"]["expression"].endswith('in ["GPU-c"]')
    assert "status" not in body


def test_a_templates_own_selectors_are_copied_beside_the_uuid_selector() -> None:
    own = {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "H100"'}}
    body = _plan((GpuRequest("a", 3, "gpus-0", template="h100s", entry="gpu"),)).body({"h100s": [own]})
    (request,) = body["spec"]["devices"]["requests"]
    assert request["exactly"]["selectors"][1] == own
    assert len(request["exactly"]["selectors"]) == 2


def test_a_slot_whose_uuids_do_not_fit_the_containers_or_are_not_uuids_is_a_problem() -> None:
    assert _plan((GpuRequest("a", 3, "gpus-0"),)).problem() is None
    assert "ask 2 GPU(s) but slot workers/3 names 3" in str(_plan((GpuRequest("a", 2, "gpus-0"),)).problem())
    bad = SLOT.model_copy(update={"gpu_uuids": ("GPU-a", 'x"] || true || ["', "GPU-c")})
    assert "is not a GPU UUID" in str(_plan((GpuRequest("a", 3, "gpus-0"),), slot=bad).problem())


def _spec(*containers: dict[str, Any], claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if claims is not None:
        spec["resourceClaims"] = claims
    return spec


def test_gpu_requests_counts_nvidia_gpu_and_gpu_templates_per_container_position() -> None:
    spec = _spec(
        {"name": "side", "resources": {"limits": {"cpu": "1"}}},
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        {"name": "b", "resources": {"claims": [{"name": "gpu"}, {"name": "nic"}]}},
        claims=[
            {"name": "gpu", "resourceClaimTemplateName": "two-gpus"},
            {"name": "nic", "resourceClaimTemplateName": "nic"},
        ],
    )
    assert gpu_requests(spec, {"two-gpus": 2}) == (
        GpuRequest("a", 2, "gpus-1"),
        GpuRequest("b", 2, "gpus-2", template="two-gpus", entry="gpu"),
    )
    init = {**spec, "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert "init container" in str(gpu_requests(init, {}))


def test_a_template_of_whole_gpus_gives_its_count_and_selectors_and_others_say_why_not() -> None:
    selector = {"cel": {"expression": "true"}}
    exactly = {"deviceClassName": "gpu.nvidia.com", "count": 4, "selectors": [selector]}
    template = {
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": exactly}]}}},
    }
    assert template_gpu_request(template) == (4, (selector,))
    mig = {
        "metadata": {"name": "m"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}
            }
        },
    }
    assert "not of DeviceClass gpu.nvidia.com" in str(template_gpu_request(mig))


def test_requests_are_read_back_from_the_pod_and_its_podsets_template_at_ungate_time() -> None:
    template = _spec(
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        {"name": "b", "resources": {"claims": [{"name": "gpu"}]}},
        claims=[{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
    )
    refs = (("a", "gpus-0"), ("b", "gpus-1"))
    assert requests_for(refs, frozenset({"optsched-gpus"}), template) == (
        GpuRequest("a", 2, "gpus-0"),
        GpuRequest("b", 0, "gpus-1", template="two-gpus", entry="gpu"),
    )
    assert "not found" in str(requests_for(refs, frozenset({"optsched-gpus", "gpu"}), template))


def _claim(
    owner: str, *, allocated: bool = False, slot: str = "workers/3", deleting: bool = False
) -> dict[str, Any]:
    body = _plan((GpuRequest("a", 3, "gpus-0"),), uid=owner).body()
    body["metadata"]["annotations"] = {CLAIM_SLOT_ANNOTATION: slot}
    if allocated:
        body["status"] = {"allocation": {"devices": {"results": [{"device": "gpu-7"}]}}}
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return body


def test_an_existing_claim_is_kept_deleted_waited_for_or_a_conflict() -> None:
    wanted = _plan((GpuRequest("a", 3, "gpus-0"),)).body()
    assert judge(None, wanted, owner_live=False) == ClaimVerdict.CREATE
    assert judge(_claim("pod-uid", allocated=True), wanted, owner_live=True) == ClaimVerdict.KEEP
    assert judge(_claim("pod-uid", slot="workers/4"), wanted, owner_live=True) == ClaimVerdict.DELETE
    assert judge(_claim("someone"), wanted, owner_live=True) == ClaimVerdict.DELETE
    assert judge(_claim("someone", allocated=True), wanted, owner_live=False) == ClaimVerdict.DELETE
    assert judge(_claim("someone", allocated=True), wanted, owner_live=True) == ClaimVerdict.CONFLICT
    assert judge(_claim("pod-uid", deleting=True), wanted, owner_live=True) == ClaimVerdict.WAIT
