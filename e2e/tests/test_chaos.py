"""A short fault-injection soak (``python -m e2e.chaos --minutes 3 --seed 1``) against the suite's cluster.

The soak runs as a subprocess, as a person would run it, with its JSON report
in the test's temporary folder; the test asserts the exact format of its last
line and that the exit status agrees with the counts in it (0 only when
nothing was over-committed, lost, stuck or escaped). On failure the report's
violations and faults are attached to the test report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e.testing import E2ECluster

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"chaos: (\d+) workloads, (\d+) faults, (\d+) over-committed, (\d+) lost, (\d+) stuck, (\d+) escapes"
)


def test_a_three_minute_soak_finds_no_over_commit_loss_stall_or_escape(
    cluster: E2ECluster, tmp_path: Path
) -> None:
    report = tmp_path / "chaos-report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if cluster.external:
        env["KUBECONFIG"] = str(cluster.kubeconfig)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "e2e.chaos",
            "--minutes",
            "3",
            "--seed",
            "1",
            "--report",
            str(report),
            "--logs",
            str(tmp_path / "logs"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=20 * 60,
        check=False,
    )
    print(done.stdout[-20000:])
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{done.stderr[-5000:]}"
    found = LINE.fullmatch(lines[-1])
    assert found, f"last line {lines[-1]!r} is not the soak's summary"
    workloads, faults, *bad = (int(g) for g in found.groups())
    if report.exists():
        doc = json.loads(report.read_text())
        print(f"--- report {report}: violations ---\n" + json.dumps(doc.get("violations"), indent=1)[:30000])
        print("--- faults ---\n" + json.dumps(doc.get("faults"), indent=1)[:10000])
    assert done.returncode in (0, 1), (
        f"the soak itself failed (exit {done.returncode}):\n{done.stderr[-5000:]}"
    )
    assert workloads > 0 and faults > 0, lines[-1]
    assert done.returncode == (1 if any(bad) else 0), f"exit {done.returncode} disagrees with {lines[-1]!r}"
    assert not any(bad), f"{lines[-1]}; see the violations above and {report}"
