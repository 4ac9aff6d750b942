"""The report: the exact last line, counts by kind, and the JSON document."""

from __future__ import annotations

import io
import json
from pathlib import Path

from e2e.chaos.invariants import Violation
from e2e.chaos.report import Report, Totals, final_line


def test_the_final_line_has_the_exact_format() -> None:
    assert final_line(Totals(12, 5, 1, 0, 2, 3)) == (
        "chaos: 12 workloads, 5 faults, 1 over-committed, 0 lost, 2 stuck, 3 escapes"
    )
    assert Totals(1, 1, 0, 0, 0, 0).clean and not Totals(1, 1, 0, 0, 1, 0).clean


def test_faults_and_violations_are_printed_counted_and_written(tmp_path: Path) -> None:
    out = io.StringIO()
    report = Report(seed=1, minutes=3, path=tmp_path / "r.json", out=out)
    entry = report.fault("node-delete", "deleted h100-001")
    report.fault_ended(entry, "recreated h100-001")
    report.workload("team/g", "gang", "honest", "2x8")
    report.violation(Violation("E", "stolen-slot", "k", "pod evil/x runs", ("pod/evil/x",)), ["node-delete"])
    assert report.totals() == Totals(1, 1, 0, 0, 0, 1)
    text = out.getvalue()
    assert "fault node-delete: deleted h100-001" in text
    assert "VIOLATION E stolen-slot: pod evil/x runs (during node-delete)" in text
    report.write()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["line"] == final_line(report.totals())
    assert doc["faults"][0]["recovery"] == "recreated h100-001"
    assert doc["violations"][0]["objects"] == ["pod/evil/x"]
