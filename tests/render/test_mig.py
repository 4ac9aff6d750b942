"""MIG layout changes in every view: the JSON/YAML document, the table and the HTML picture."""

from __future__ import annotations

import json

import pytest
import yaml

from optsched.model.mig import MigChange, MigGpu, MigInstanceState, slots
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import Snapshot
from optsched.render.compare import PolicyResult, compare_document, render_compare_table
from optsched.render.html import render_html
from optsched.render.json import render_json
from optsched.render.mig import SLOT_W, layout_summary
from optsched.render.table import render_table
from optsched.render.yaml import render_yaml
from tests.builders import H100, node, pods, snapshot, workload
from tests.render.test_html import _parse

SEVEN_1G = tuple(("1g.10gb", s) for s in range(7))
AFTER = (("3g.40gb", 4), *(("1g.10gb", s) for s in range(4)))


@pytest.fixture
def mig_snapshot() -> Snapshot:
    # GPU 0 of h1 runs seven 1g.10gb, the one at slice 0 held by a running pod.
    instances = tuple(MigInstanceState(profile=p, start=s, in_use=s == 0) for p, s in SEVEN_1G)
    gpu = MigGpu(index=0, uuid="GPU-h1-0", model="H100-80GB", instances=instances)
    h1 = node("h1", gpus=1, product=H100, extended={"nvidia.com/mig-1g.10gb": 7})
    return snapshot(
        [h1.model_copy(update={"mig_gpus": (gpu,)})],
        [workload("nb", pods(1, 0, extended={"nvidia.com/mig-3g.40gb": 1}), namespace="ml")],
    )


@pytest.fixture
def mig_plan() -> Plan:
    return Plan(
        status=PlanStatus.OPTIMAL,
        workloads=[
            WorkloadDecision(
                name="ml/nb",
                decision="admit",
                pod_sets=[PodSetPlacement(name="main", pods=[PodPlacement(index=0, node="h1", gpus=[])])],
                waits_for_layout=["h1"],
            )
        ],
        mig_changes=[MigChange(node="h1", gpu=0, uuid="GPU-h1-0", from_=slots(SEVEN_1G), to=slots(AFTER))],
    )


def test_json_carries_the_changes_and_who_waits(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    doc = json.loads(render_json(mig_snapshot, mig_plan))
    assert doc["migChanges"] == [
        {
            "node": "h1",
            "gpu": 0,
            "uuid": "GPU-h1-0",
            "from": [{"profile": "1g.10gb", "start": s} for s in range(7)],
            "to": [
                *({"profile": "1g.10gb", "start": s} for s in range(4)),
                {"profile": "3g.40gb", "start": 4},
            ],
        }
    ]
    assert doc["workloads"][0]["waitsForLayout"] == ["h1"]
    assert yaml.safe_load(render_yaml(mig_snapshot, mig_plan)) == doc


def test_the_plan_document_reads_back_into_the_same_plan(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    doc = json.loads(render_json(mig_snapshot, mig_plan))
    assert Plan.model_validate(doc).mig_changes == mig_plan.mig_changes


@pytest.mark.parametrize(
    ("layout", "text"),
    [
        ((), "(empty)"),
        ((("7g.80gb", 0),), "7g.80gb@0"),
        (SEVEN_1G, "7x1g.10gb@0..6"),
        (AFTER, "3g.40gb@4 + 4x1g.10gb@0..3"),
        ((("1g.20gb", 6), ("2g.20gb", 0), ("1g.20gb", 2), ("2g.20gb", 4)), "2x2g.20gb@0,4 + 2x1g.20gb@2,6"),
    ],
)
def test_a_layout_in_one_phrase(layout: tuple[tuple[str, int], ...], text: str) -> None:
    assert layout_summary(layout) == text


def test_table_has_a_section_of_layout_changes(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    lines = render_table(mig_snapshot, mig_plan).splitlines()
    start = lines.index("MIG LAYOUT CHANGES (1 GPU)")
    assert lines[start + 1 : start + 3] == [
        "  NODE  GPU  LAYOUT (before -> after)                      KEPT IN USE  WAITING",
        "  h1      0  7x1g.10gb@0..6 -> 3g.40gb@4 + 4x1g.10gb@0..3  1g.10gb@0    ml/nb",
    ]


def test_an_admitted_workload_says_it_waits_for_the_layout(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    lines = render_table(mig_snapshot, mig_plan).splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("  ml/nb"))
    assert lines[row + 1].strip() == "waits for the MIG layout on h1"


def test_no_section_without_changes(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    plain = mig_plan.model_copy(update={"mig_changes": []})
    assert "MIG LAYOUT CHANGES" not in render_table(mig_snapshot, plain)
    assert "MIG layout changes" not in render_html(mig_snapshot, plain)


def test_html_draws_each_changed_gpu_before_and_after(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    text = render_html(mig_snapshot, mig_plan)
    parsed = _parse(text)
    assert parsed.errors == [] and parsed.stack == []
    assert "<h2>MIG layout changes (1)</h2>" in text
    # Two 8-slot memory axes; seven instances before, five after.
    assert parsed.classes.count("slot") == 16
    assert parsed.classes.count("mig") == 12
    # The 3g.40gb is new; the 1g.10gb at 4, 5 and 6 go; the one at 0 is in use on both bars.
    assert parsed.classes.count("new") == 1
    assert parsed.classes.count("gone") == 3
    assert parsed.classes.count("inuse") == 2
    assert "3g.40gb at memory slice 4 (slices 4..7)\ncreated by the change" in parsed.titles
    assert "1g.10gb at memory slice 0 (slices 0..0)\nin use by a running pod" in parsed.titles
    # The 3g.40gb block spans its four memory slices from slice 4.
    assert f'class="mig new" x="{46 + 4 * SLOT_W + 2}" y="28" width="{4 * SLOT_W - 4}"' in text
    assert "waits for the MIG layout on h1" in text


def test_who_waits_is_named_once_per_node(mig_snapshot: Snapshot, mig_plan: Plan) -> None:
    second = MigChange(node="h1", gpu=1, uuid="GPU-h1-1", from_=slots(SEVEN_1G), to=slots((("7g.80gb", 0),)))
    two = mig_plan.model_copy(update={"mig_changes": [*mig_plan.mig_changes, second]})
    lines = render_table(mig_snapshot, two).splitlines()
    start = lines.index("MIG LAYOUT CHANGES (2 GPUs)")
    assert lines[start + 2].endswith("ml/nb")
    assert lines[start + 3].startswith("  h1      1  7x1g.10gb@0..6 -> 7g.80gb@0")
    assert lines[start + 3].endswith("as GPU 0")


def test_compare_counts_the_gpus_each_policy_reconfigures(mig_plan: Plan) -> None:
    plain = mig_plan.model_copy(update={"mig_changes": []})
    results = [PolicyResult("optimizer", mig_plan, 0.1), PolicyResult("bestfit", plain, 0.1)]
    row = next(line for line in render_compare_table(results).splitlines() if "MIG GPUs reconfigured" in line)
    assert row.split()[-2:] == ["1", "0"]
    assert [p["migGpusReconfigured"] for p in compare_document(results)["policies"]] == [1, 0]  # type: ignore[index]
    assert "MIG GPUs reconfigured" not in render_compare_table([PolicyResult("bestfit", plain, 0.1)])
