"""Golden output of ``optsched plan --deterministic`` on every file in ``examples/``.

A deterministic budget with one search worker gives the same plan on every run,
so the table, the ``--explain`` view, the JSON document and the side-by-side
comparison are pinned byte for byte (after masking wall-clock figures, which do
vary). A change to any of them must be deliberate: regenerate with
``OPTSCHED_UPDATE_GOLDEN=1 python -m pytest tests/test_plan_golden.py`` and read
the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from optsched.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("OPTSCHED_UPDATE_GOLDEN") == "1"

VIEWS: dict[str, list[str]] = {
    "table": [],
    "explain": ["--explain"],
    "json": ["--format", "json"],
    "compare": ["--compare"],
}

_MASKS = (
    (re.compile(r"solve \d+(\.\d+)? ?(ms|s)\b"), "solve <time>"),
    (re.compile(r'"solveSeconds": [0-9.e-]+'), '"solveSeconds": <time>'),
    (re.compile(r"(?m)^(  time  ).*$"), r"\1<times>"),
)
_SOLVER_LOG = re.compile(r"(?ms)^SOLVER STAGES\n(.*?)(?=^\S|\Z)")


def _normalise(text: str) -> str:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)

    def stages(match: re.Match[str]) -> str:
        # Keep each stage's objective; the solver's log lines carry timings and model sizes.
        kept = [line for line in match.group(1).splitlines() if re.match(r"^  \S+\s+-?[0-9.]+$", line)]
        return "SOLVER STAGES\n" + "".join(f"{line}\n" for line in kept) + "\n"

    return _SOLVER_LOG.sub(stages, text)


def _examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and p.suffix in (".yaml", ".txt"))


CASES = [(path, view) for path in _examples() for view in VIEWS]


@pytest.mark.parametrize(("path", "view"), CASES, ids=[f"{p.relative_to(EXAMPLES)}:{v}" for p, v in CASES])
def test_plan_output_is_pinned(
    path: Path, view: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    code = main(["plan", "--snapshot", str(path.relative_to(ROOT)), "--deterministic", *VIEWS[view]])
    captured = capsys.readouterr()
    got = _normalise(f"exit {code}\n--- stdout\n{captured.out}--- stderr\n{captured.err}")
    name = str(path.relative_to(EXAMPLES)).replace("/", "__") + f".{view}.txt"
    golden = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(got, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden.name}; run with OPTSCHED_UPDATE_GOLDEN=1"
    assert got == golden.read_text(encoding="utf-8")
