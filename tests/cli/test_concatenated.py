"""``optsched plan`` over dumps concatenated by hand: duplicates are read once, never an error."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import FAST, SMALL


def test_the_plan_command_reads_a_concatenated_dump(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    text = SMALL.read_text(encoding="utf-8")
    path = tmp_path / "twice.yaml"
    path.write_text(text + "\n---\n" + text, encoding="utf-8")
    result = run_cli("plan", "--snapshot", str(path), *FAST)
    assert result.code == 0, result.err
    assert "ClusterQueue team-a appears 2 times in the input" in result.err
    assert "14 Node objects appear more than once in the input (h100-01, " in result.err
    assert "WorkloadPriorityClass" not in result.err  # not read, so not reported
    single = run_cli("plan", "--snapshot", str(SMALL), *FAST)
    plan_lines = result.out.split("\nWARNINGS\n")[0].splitlines()[1:]
    assert plan_lines == single.out.split("\nWARNINGS\n")[0].splitlines()[1:]
