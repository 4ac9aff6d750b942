"""Pods are matched to their Workload, never to a plan id alone; their own GPU claims are not trusted."""

from __future__ import annotations

from datetime import UTC, datetime

from optsched.controller.decide import decide
from optsched.controller.inputs import build_input
from optsched.controller.records import record_from_decision
from optsched.model.names import GPUS_ANNOTATION, POD_INDEX_ANNOTATION
from optsched.model.placement import PodPlacement
from optsched.model.plan import PodSetPlacement, WorkloadDecision
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def _busy(inp, node: str) -> tuple[list[int], int]:
    """GPU indices known to be taken on ``node``, and whole GPUs taken at unknown indices."""
    usage = inp.snapshot.usage[node]
    return [i for i, milli in enumerate(usage.gpu_milli) if milli >= 1000], usage.unknown_index_gpus


def _decision(name: str, node: str, gpus: list[int]) -> WorkloadDecision:
    return WorkloadDecision(
        name=f"default/{name}",
        decision="admit",
        gpus=len(gpus),
        pod_sets=[
            PodSetPlacement(name="main", flavor="default", pods=[PodPlacement(index=0, node=node, gpus=gpus)])
        ],
    )


def _victim(gpus: list[int] | None = None):
    """An admitted workload owned by Job ``job-v``, one slot on n1, its pod not created yet."""
    record = record_from_decision("uid-victim", _decision("victim", "n1", gpus or list(range(8))))
    workload = o.workload(
        "victim",
        gpus=8,
        check="Ready",
        admitted=True,
        record=record.to_annotation(),
        uid="uid-victim",
        owner="job-v",
    )
    return record, workload


def test_a_pod_in_another_namespace_with_a_copied_plan_id_takes_no_slot():
    record, victim = _victim()
    thief = o.pod(
        "thief",
        plan_id=record.plan_id,
        namespace="evil",
        gpus=8,
        owner="job-evil",
        created="2026-01-01T00:00:30Z",
    )
    mine = o.pod("victim-0", plan_id=record.plan_id, gpus=8, owner="job-v")
    inp = build_input([*o.base_objects(o.node("n1")), victim], ["optsched"], pods=[thief, mine])
    pins = decide(inp, None, now=NOW).pins
    assert [(p.namespace, p.name) for p in pins] == [("default", "victim-0")]


def test_a_bare_pod_in_the_same_namespace_with_the_plan_id_takes_no_slot():
    record, victim = _victim()
    forged = o.pod("forged", plan_id=record.plan_id, gpus=8, created="2026-01-01T00:00:30Z")
    inp = build_input([*o.base_objects(o.node("n1")), victim], ["optsched"], pods=[forged])
    out = decide(inp, None, now=NOW)
    assert out.pins == ()
    assert any("forged" in line and "owner" in line for line in out.waiting)


def test_a_forged_slot_annotation_neither_takes_the_slot_nor_erases_its_capacity():
    record, victim = _victim()
    forged = o.pod(
        "forged",
        plan_id=record.plan_id,
        gated=False,
        node="elsewhere",
        pinned_index=0,
        namespace="evil",
        gpus=0,
    )
    inp = build_input([*o.base_objects(o.node("n1")), victim], ["optsched"], pods=[forged])
    assert inp.assumed == 1
    assert _busy(inp, "n1") == (list(range(8)), 0)
    mine = o.pod("victim-0", plan_id=record.plan_id, gpus=8, owner="job-v")
    inp = build_input([*o.base_objects(o.node("n1")), victim], ["optsched"], pods=[forged, mine])
    assert [p.name for p in decide(inp, None, now=NOW).pins] == ["victim-0"]


def test_self_declared_gpu_indices_on_a_foreign_pod_are_not_trusted():
    foreign = o.pod(
        "foreign", plan_id=None, gated=False, node="n1", gpus=4, annotations={GPUS_ANNOTATION: "4,5,6,7"}
    )
    foreign["status"]["phase"] = "Running"
    inp = build_input([*o.base_objects(o.node("n1")), foreign], ["optsched"])
    assert _busy(inp, "n1") == ([], 4), "claimed indices must not be taken as known"


def test_the_recorded_slot_defines_a_pinned_pods_gpus_whatever_its_annotation_says():
    record, victim = _victim(gpus=[0, 1, 2, 3])
    victim["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "nvidia.com/gpu"
    ] = "4"
    bound = o.pod(
        "victim-0",
        plan_id=record.plan_id,
        gated=False,
        node="n1",
        pinned_index=0,
        gpus=4,
        owner="job-v",
        annotations={GPUS_ANNOTATION: "4,5,6,7"},
        phase="Running",
    )
    objects = [*o.base_objects(o.node("n1")), victim, bound]
    inp = build_input(objects, ["optsched"], pods=[bound])
    assert _busy(inp, "n1") == ([0, 1, 2, 3], 0)
    assert bound["metadata"]["annotations"][POD_INDEX_ANNOTATION] == "0", "the read objects are not changed"
