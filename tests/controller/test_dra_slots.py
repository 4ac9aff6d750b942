"""DRA claims and slots: JobSet pods and indices past the slots, pods without a claim on DRA nodes,
claims a pod names that optsched would not make, request names that survive an inserted container."""

from __future__ import annotations

import base64
import json
from typing import Any

from optsched.controller.claims import (
    ClaimForm,
    GpuRequest,
    claim_form,
    claim_stem,
    indexed_claim_name,
    requests_for,
    template_gpu_request,
)
from optsched.controller.pinning import pins_for
from optsched.controller.views import read_pod, read_workload
from optsched.controller.webhook import DraFacts, mutate
from optsched.kueue.managed_queues import ManagedQueues
from optsched.kueue.placement_record import PlacementRecord, plan_id_of
from optsched.model.names import (
    COMPLETION_INDEX_LABEL,
    JOBSET_JOB_INDEX_LABEL,
    PLAN_ID_LABEL,
    POD_CLAIM_NAME,
    PODSET_LABEL,
)
from optsched.model.placement import Enforcement, PodPlacement
from optsched.snapshot.dra_demand import template_gpus
from tests.controller import objects as o


def _slot(index: int, node: str = "n1", *, dra: bool = True) -> PodPlacement:
    return PodPlacement(
        index=index,
        node=node,
        gpus=(index,),
        gpu_uuids=(f"GPU-{node}-{index}",),
        enforcement=Enforcement.DRA if dra else Enforcement.PREDICTED,
    )


def _webhook_pod(index: int, job: int | None = None) -> dict[str, Any]:
    labels = {PLAN_ID_LABEL: "v2-js", PODSET_LABEL: "workers", COMPLETION_INDEX_LABEL: str(index)}
    if job is not None:
        labels[JOBSET_JOB_INDEX_LABEL] = str(job)
    containers = [{"name": "train", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    return {"metadata": {"name": f"p-{job}-{index}", "labels": labels}, "spec": {"containers": containers}}


def _claim_of(pod: dict[str, Any], record: PlacementRecord | None, uid: str) -> str | None:
    request = {"uid": uid, "operation": "CREATE", "namespace": "ns", "kind": {"kind": "Pod"}, "object": pod}
    facts = DraFacts(records=lambda ns, plan: record, templates=lambda ns, name: None)
    answer = mutate({"request": request}, ManagedQueues(), facts)
    assert answer["response"]["allowed"] is True, answer
    raw = answer["response"].get("patch")
    ops = {op["path"]: op["value"] for op in json.loads(base64.b64decode(raw))} if raw else {}
    for entry in ops.get("/spec/resourceClaims", ()):
        if entry["name"] == POD_CLAIM_NAME:
            return str(entry["resourceClaimName"])
    return None


def test_jobset_pods_sharing_a_completion_index_get_distinct_claims_whose_slot_is_taken_at_ungate() -> None:
    record = PlacementRecord(plan_id="v2-js", pod_sets={"workers": tuple(_slot(i) for i in range(4))})
    names = [_claim_of(_webhook_pod(0, job), record, f"req-{job}") for job in (0, 1)]
    assert names[0] and names[1] and names[0] != names[1]
    for name in names:
        assert claim_form(str(name), "ns", "v2-js", "workers", None) == ClaimForm.UNINDEXED
        assert "j" in str(name)[len(claim_stem("ns", "v2-js", "workers")) :]


def test_an_index_past_the_slots_gets_a_claim_whose_slot_is_taken_at_ungate_not_none() -> None:
    record = PlacementRecord(plan_id="v2-js", pod_sets={"workers": (_slot(0), _slot(1))})
    inside = _claim_of(_webhook_pod(1), record, "a")
    past = _claim_of(_webhook_pod(5), record, "b")
    assert inside == indexed_claim_name("ns", "v2-js", "workers", 1)
    assert past is not None and claim_form(past, "ns", "v2-js", "workers", 5) == ClaimForm.UNINDEXED


def test_our_own_pod_reinvoked_is_allowed_though_its_record_cannot_be_read_any_more() -> None:
    record = PlacementRecord(plan_id="v2-js", pod_sets={"workers": (_slot(0), _slot(1))})
    name = _claim_of(_webhook_pod(1), record, "a")
    again = _webhook_pod(1)
    again["spec"]["resourceClaims"] = [{"name": POD_CLAIM_NAME, "resourceClaimName": name}]
    assert _claim_of(again, None, "b") is None  # allowed (asserted inside), nothing added again


def _view(plan_id: str, slots: list[PodPlacement], name: str = "wl", owner: str = "job-uid") -> Any:
    record = PlacementRecord(plan_id=plan_id, pod_sets={"main": tuple(slots)}).to_annotation()
    raw = o.workload(name, check="Ready", record=record, count=len(slots), uid=f"{name}-uid", owner=owner)
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"] = [
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    view = read_workload(raw, ["optsched"], spec=False)
    assert view.record is not None
    return view


def _claim_pod(name: str, plan_id: str, claim: str, uid: str, **kw: Any) -> Any:
    raw = o.pod(name, plan_id=plan_id, owner="job-uid", uid=uid, **kw)
    raw["spec"]["resourceClaims"] = [{"name": POD_CLAIM_NAME, "resourceClaimName": claim}]
    raw["spec"]["containers"] = [
        {"name": "train", "resources": {"claims": [{"name": POD_CLAIM_NAME, "request": "gpus-0"}]}}
    ]
    return raw


def test_two_jobset_pods_with_the_same_completion_index_are_both_pinned() -> None:
    slots = [_slot(0), _slot(1)]
    plan_id = plan_id_of("wl-uid", [("main", slots)])
    view = _view(plan_id, slots)
    stem = claim_stem("default", plan_id, "main")
    pods = []
    for job in (0, 1):
        raw = _claim_pod(f"p{job}", plan_id, f"{stem}uj{job}-0-abc", f"uid-{job}", index=0)
        raw["metadata"]["labels"][JOBSET_JOB_INDEX_LABEL] = str(job)
        pods.append(read_pod(raw))
    found = pins_for(pods, {("default", plan_id): view})
    assert sorted(p.slot.index for p in found.pins) == [0, 1] and found.waiting == ()
    assert all(p.claim is not None for p in found.pins)


def test_a_claim_name_optsched_would_not_make_for_the_podset_is_never_created() -> None:
    slots = [_slot(0)]
    plan_id = plan_id_of("wl-uid", [("main", slots)])
    foreign = indexed_claim_name("default", "v2-other-plan", "main", 0)
    pod = read_pod(_claim_pod("p0", plan_id, foreign, "uid-0", index=0))
    found = pins_for([pod], {("default", plan_id): _view(plan_id, slots)})
    assert found.pins == () and "not one optsched names" in found.waiting[0]


def test_a_pod_without_a_claim_waits_off_a_dra_node_where_another_slots_claim_is_not_allocated() -> None:
    mine, theirs = [_slot(0)], [_slot(1)]
    plan_a, plan_b = plan_id_of("a-uid", [("main", mine)]), plan_id_of("b-uid", [("main", theirs)])
    records = {
        ("default", plan_a): _view(plan_a, mine, "a"),
        ("default", plan_b): _view(plan_b, theirs, "b", owner="b-job"),
    }
    claimless = read_pod(o.pod("a-0", plan_id=plan_a, owner="job-uid", uid="a0", index=0, gpus=1))
    b_claim = indexed_claim_name("default", plan_b, "main", 0)
    b_raw = _claim_pod("b-0", plan_b, b_claim, "b0", gated=False, pinned_index=1, index=0)
    b_raw["metadata"]["ownerReferences"][0]["uid"] = "b-job"
    found = pins_for([claimless, read_pod(b_raw)], records)
    assert found.pins == () and "first-fit" in found.waiting[0] and f"plan {plan_b}" in found.waiting[0]
    b_raw["spec"]["nodeName"] = "n1"  # its claim allocated, it is bound: nothing promised is left
    found = pins_for([claimless, read_pod(b_raw)], records)
    assert [p.name for p in found.pins] == ["a-0"]


def test_pods_without_a_claim_take_device_plugin_slots_before_dra_ones() -> None:
    slots = [_slot(0), _slot(1, "n2", dra=False)]
    plan_id = plan_id_of("wl-uid", [("main", slots)])
    pod = read_pod(o.pod("p", plan_id=plan_id, owner="job-uid", uid="u", gpus=1))
    (pin,) = pins_for([pod], {("default", plan_id): _view(plan_id, slots)}).pins
    assert pin.slot.node == "n2"


def test_request_names_come_from_each_container_so_an_inserted_sidecar_shifts_nothing() -> None:
    template = {"containers": [{"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    refs = (("train", "gpus-0"),)  # a sidecar injected first moved "train" to position 1
    assert requests_for(refs, frozenset({POD_CLAIM_NAME}), template) == (GpuRequest("train", 2, "gpus-0"),)
    assert "not in its PodSet's template" in str(requests_for((("side", "gpus-0"),), frozenset(), template))
    raw = o.pod("p", plan_id="v2-x", owner="job-uid")
    raw["spec"]["containers"] = [
        {"name": "istio-proxy"},
        {"name": "train", "resources": {"claims": [{"name": POD_CLAIM_NAME, "request": "gpus-0"}]}},
    ]
    assert read_pod(raw).claim_containers == (("train", "gpus-0"),)


def test_a_template_the_planner_cannot_count_is_not_moved_and_one_it_counts_moves_with_that_count() -> None:
    def template(count: Any) -> dict[str, Any]:
        exactly = {"deviceClassName": "gpu.nvidia.com", "count": count}
        requests = [{"name": "g", "exactly": exactly}]
        return {
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {"spec": {"devices": {"requests": requests}}},
        }

    assert template_gpus(template(2)) == 2 and template_gpu_request(template(2)) == (2, ())
    assert "expected a whole number" in str(template_gpu_request(template("2")))
