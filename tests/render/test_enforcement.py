"""The plan's views say how each admitted workload's GPUs are enforced, and the summary counts it."""

from __future__ import annotations

import json

from optsched.model.placement import Enforcement, Placement, PodPlacement, WorkloadAssignment
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import GpuMode, Snapshot
from optsched.planning.build import build_plan
from optsched.render.json import render_json
from optsched.render.table import render_table
from tests.builders import node, pods, snapshot, workload

UUIDS = tuple(f"GPU-d{i}" for i in range(8))


def _mixed() -> tuple[Snapshot, Plan]:
    dra = node("dra-01").model_copy(update={"gpu_mode": GpuMode.DRA, "gpu_uuids": UUIDS})
    snap = snapshot(
        [dra, node("dp-01")],
        [
            workload("pinned", pods(1, 2)),
            workload("mixed", pods(3, 1)),
            workload("share", pods(1, 1, gpu_milli=250)),
        ],
    )
    admitted = {
        "default/pinned": [PodPlacement(index=0, node="dra-01", gpus=(0, 1))],
        "default/mixed": [
            PodPlacement(index=0, node="dra-01", gpus=(2,)),
            PodPlacement(index=1, node="dra-01", gpus=(3,)),
            PodPlacement(index=2, node="dp-01", gpus=(0,)),
        ],
        "default/share": [PodPlacement(index=0, node="dp-01", gpus=(1,))],
    }
    placement = Placement(
        admitted={
            k: WorkloadAssignment(pods={"main": v}, flavors={"main": None}) for k, v in admitted.items()
        }
    )
    return snap, build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="test")


def _row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(name))


def test_the_admitted_table_has_an_enforced_column() -> None:
    snap, plan = _mixed()
    text = render_table(snap, plan)
    assert "ENFORCED" in next(line for line in text.splitlines() if "WORKLOAD" in line and "FLAVOR" in line)
    assert _row(text, "default/pinned").endswith(" dra")
    assert _row(text, "default/mixed").endswith(" dra 2, predicted 1")
    assert _row(text, "default/share").endswith(" none")


def test_the_summary_counts_pods_per_enforcement() -> None:
    snap, plan = _mixed()
    assert plan.summary.enforcement == {"dra": 3, "predicted": 1, "none": 1}
    assert "enforced GPUs      dra 3, predicted 1, none 1 pods" in render_table(snap, plan)


def test_json_carries_gpu_uuids_and_enforcement_per_pod_and_the_summary_counts() -> None:
    snap, plan = _mixed()
    doc = json.loads(render_json(snap, plan))
    pinned = next(w for w in doc["workloads"] if w["name"] == "default/pinned")
    pod = pinned["podSets"][0]["pods"][0]
    assert pod["gpuUUIDs"] == ["GPU-d0", "GPU-d1"] and pod["enforcement"] == Enforcement.DRA.value
    share = next(w for w in doc["workloads"] if w["name"] == "default/share")
    assert share["podSets"][0]["pods"][0] == {
        "index": 0,
        "node": "dp-01",
        "gpus": [1],
        "gpuUUIDs": None,
        "enforcement": "none",
        "nodeOrder": None,
    }
    assert doc["summary"]["enforcement"] == {"dra": 3, "predicted": 1, "none": 1}
