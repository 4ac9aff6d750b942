"""DRA nodes: a slot whose claim can no longer get its planned GPU (unpublished, held by another claim) is
re-planned at once, with an Event naming the GPU and why; a pod's own claim and pods without one are not."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from optsched.controller.claims import indexed_claim_name
from optsched.controller.decide import ActionKind, Decisions, decide
from optsched.controller.events import EventReason
from optsched.controller.inputs import build_input
from optsched.controller.records import PlacementRecord, record_from_decision
from optsched.model.names import POD_CLAIM_NAME
from optsched.model.placement import Enforcement, PodPlacement
from optsched.model.plan import PodSetPlacement, WorkloadDecision
from tests.controller import objects as o
from tests.snapshot.dra_raw import device, resource_claim, resource_slice

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
NODE = "n1"


def _uuid(i: int) -> str:
    return f"GPU-{NODE}-{i:04d}"


def _record() -> PlacementRecord:
    pods = [
        PodPlacement(
            index=i,
            node=NODE,
            gpus=[2 * i, 2 * i + 1],
            gpu_uuids=[_uuid(2 * i), _uuid(2 * i + 1)],
            enforcement=Enforcement.DRA,
        )
        for i in range(2)
    ]
    decision = WorkloadDecision(
        name="default/a",
        decision="admit",
        gpus=4,
        pod_sets=[PodSetPlacement(name="main", flavor="default", pods=pods)],
    )
    return record_from_decision("uid-a", decision)


def _pod(
    record: PlacementRecord, index: int, *, claim: bool = True, node: str | None = None
) -> dict[str, Any]:
    raw = o.pod(f"a-{index}", plan_id=record.plan_id, index=index, gated=False, pinned_index=index, node=node)
    if claim:
        name = indexed_claim_name("default", record.plan_id, "main", index)
        raw["spec"]["resourceClaims"] = [{"name": POD_CLAIM_NAME, "resourceClaimName": name}]
    return raw


def _decide(*extra: dict[str, Any], claim: bool = True, bound: bool = False) -> Decisions:
    record = _record()
    ready = o.workload("a", check="Ready", admitted=True, record=record.to_annotation(), count=2, gpus=2)
    pods = [_pod(record, i, claim=claim, node=NODE if bound else None) for i in range(2)]
    objects = [*o.base_objects(o.node(NODE, gpus=0)), ready, *extra]
    return decide(build_input(objects, ["optsched"], pods=pods), None, now=NOW)


def _published(*left_out: int) -> dict[str, Any]:
    return resource_slice(NODE, [device(i, _uuid(i)) for i in range(8) if i not in left_out], generation=2)


def test_a_planned_gpu_left_out_of_the_slice_re_plans_the_workload_naming_it() -> None:
    [action] = _decide(_published(3)).actions
    assert action.kind == ActionKind.REPLAN and action.check is not None
    assert action.check.state == "Retry" and action.check.requeue_after_seconds == 0
    assert action.event is not None and action.event.reason == EventReason.PLANNED_GPU_UNAVAILABLE
    assert _uuid(3) in action.event.message and "not published" in action.event.message
    assert "a-1" in action.event.message


def test_a_planned_gpu_allocated_to_another_claim_re_plans_the_workload() -> None:
    other = resource_claim("someone-else", NODE, "gpu-0", namespace="default")
    [action] = _decide(_published(), other).actions
    assert action.kind == ActionKind.REPLAN and action.event is not None
    assert _uuid(0) in action.event.message and "default/someone-else" in action.event.message


def test_a_gpu_held_by_the_slots_own_claim_is_its_own() -> None:
    record = _record()
    own = resource_claim(
        indexed_claim_name("default", record.plan_id, "main", 1), NODE, "gpu-2", "gpu-3", namespace="default"
    )
    assert _decide(_published(), own).actions == ()


def test_all_published_and_free_needs_no_repair() -> None:
    assert _decide(_published()).actions == ()


def test_pods_without_a_claim_or_already_bound_are_not_judged() -> None:
    assert _decide(_published(3), claim=False).actions == (), "node-pinned only: no UUID was promised"
    assert _decide(_published(3), bound=True).actions == (), "bound: the devices are allocated already"


def test_a_read_without_any_resource_slice_judges_nothing() -> None:
    assert _decide().actions == (), "DRA not served (or not readable): nothing is known to be gone"


def test_an_incomplete_pool_judges_nothing() -> None:
    incomplete = resource_slice(NODE, [device(0, _uuid(0))], slice_count=2)
    assert _decide(incomplete).actions == ()
