from __future__ import annotations

from optsched.model.plan import Plan, PlanStatus, WorkloadDecision
from optsched.model.reasons import Reason, ReasonCode
from optsched.model.snapshot import HeldWorkload, Snapshot
from optsched.render.table import render_table
from tests.builders import pods, workload
from tests.render.conftest import DEFER_REASON


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_header_names_status_policy_gap_and_stages(small_snapshot: Snapshot, small_plan: Plan) -> None:
    text = render_table(small_snapshot, small_plan)
    head = text.splitlines()[0]
    assert "OPTIMAL" in head and "optimizer" in head and "gap 0.00%" in head
    assert "admitted 16.25" in text.splitlines()[1]


def test_admitted_rows_show_compact_nodes_and_gpu_indices(small_snapshot: Snapshot, small_plan: Plan) -> None:
    rows = _section(render_table(small_snapshot, small_plan), "ADMITTED")
    train = next(r for r in rows if "ml/train" in r)
    assert "2 x 8" in train and "h100-01..02[0-7]" in train and "h100" in train.split()[-2]
    notebook = next(r for r in rows if "ml/notebook" in r)
    assert "1 x 0.25" in notebook and "h100-03[2]" in notebook


def test_deferred_row_gives_the_reason_in_words(small_snapshot: Snapshot, small_plan: Plan) -> None:
    text = render_table(small_snapshot, small_plan)
    rows = _section(text, "DEFERRED")
    assert any("ml/big" in r and DEFER_REASON in r for r in rows)
    assert "--explain shows all" in text
    assert "quota: queue has 8 GPUs left" not in text


def test_explain_adds_all_reasons_excluded_nodes_and_stages(
    small_snapshot: Snapshot, small_plan: Plan
) -> None:
    text = render_table(small_snapshot, small_plan, explain=True)
    assert "quota: queue has 8 GPUs left" in text
    # The 4-GPU A100 (one unhealthy) and the 2-GPU T4 cannot hold an 8-GPU pod.
    assert "podset main: 3 of 5 nodes eligible" in text
    assert "excluded 1 node: has 3 healthy GPUs, pod needs 8" in text
    assert "SOLVER STAGES" in text


def test_summary_before_and_after(small_snapshot: Snapshot, small_plan: Plan) -> None:
    rows = _section(render_table(small_snapshot, small_plan), "SUMMARY")
    joined = "\n".join(rows)
    assert "40.5 -> 24.25 of 45" in joined
    assert "3.50 -> 1.25" in joined
    assert "2/2 (100%)" in joined


def test_warnings_listed(small_snapshot: Snapshot, small_plan: Plan) -> None:
    assert "! Node bad-01" in render_table(small_snapshot, small_plan)


def test_colour_only_when_asked(small_snapshot: Snapshot, small_plan: Plan) -> None:
    assert "\033[" not in render_table(small_snapshot, small_plan)
    assert "\033[" in render_table(small_snapshot, small_plan, color=True)


def test_empty_plan_says_none(small_snapshot: Snapshot) -> None:
    text = render_table(small_snapshot, Plan(status=PlanStatus.EMPTY))
    assert "ADMITTED (0 workloads, 0 GPUs)" in text and "(none)" in text


def test_reasons_wrap_to_the_given_width(small_snapshot: Snapshot, small_plan: Plan) -> None:
    rows = _section(render_table(small_snapshot, small_plan, width=80), "DEFERRED")
    assert max(len(line) for line in rows) <= 80
    assert " ".join(" ".join(rows).split()).count("the fullest rack has 16 free") == 1


def test_a_held_workload_shows_its_shape_and_kueues_reason(
    small_snapshot: Snapshot, small_plan: Plan
) -> None:
    reason = Reason(code=ReasonCode.QUEUE_NOT_FOUND, message="LocalQueue gone doesn't exist")
    stray = HeldWorkload(workload=workload("stray", pods(3, 2), namespace="ml"), reason=reason)
    snap = small_snapshot.model_copy(update={"held": (stray,)})
    decision = WorkloadDecision(name="ml/stray", decision="defer", reasons=[reason])
    plan = small_plan.model_copy(update={"workloads": [*small_plan.workloads, decision]})
    [row] = [r for r in _section(render_table(snap, plan), "DEFERRED") if "ml/stray" in r]
    assert row.split()[1:6] == ["0", "3", "x", "2", "6"]
    assert row.endswith("LocalQueue gone doesn't exist")
