"""Paths to the example snapshots and a helper that runs the CLI in-process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from optsched.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BAD = EXAMPLES / "bad"
SMALL = EXAMPLES / "cluster-small.yaml"
FIFO_TRAP = EXAMPLES / "fifo-trap.yaml"
# A baseline keeps most CLI tests independent of solver timing; one test runs the optimizer.
FAST = ["--policy", "bestfit"]


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def run(*argv: str) -> Result:
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
