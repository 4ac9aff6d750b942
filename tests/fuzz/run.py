"""Run ``optsched plan`` on mutated real-world dumps and count how each case ended.

Every case must end in exit 0 (planned, perhaps with warnings) or exit 2 (the
input named as bad), within a time bound, and never with a traceback: an exit
1 is an internal error, a bug. ``python -m tests.fuzz.run --cases 2000``
prints the figures for a longer run than the unit tests do.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from optsched.cli import main
from optsched.snapshot.documents import flatten
from tests.fuzz.mutate import Case, mutate

CORPUS = Path(__file__).resolve().parent / "corpus"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HANG_SECONDS = 20
POLICIES = ("optimizer", "firstfit", "bestfit", "fgd", "tas", "leastallocated")
FORMATS = ("table", "json", "yaml", "html")
SEEDS = ("7", "0", "-1", str(2**64), str(2**70), "x")


def corpus() -> list[tuple[str, Any]]:
    """The real-world dumps the cases mutate: the fuzz corpus and the bundled examples."""
    files = [*sorted(CORPUS.glob("*.yaml")), EXAMPLES / "cluster-small.yaml", EXAMPLES / "fifo-trap.yaml"]
    out = []
    for path in files:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        if len(documents) == 1:
            out.append((path.name, documents[0]))
        else:
            out.append((path.name, {"apiVersion": "v1", "kind": "List", "items": documents}))
    return out


@dataclass
class Outcome:
    case: Case
    argv: tuple[str, ...]
    code: int | str
    seconds: float
    stderr: str


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, code: int | str) -> int:
        return sum(1 for o in self.outcomes if o.code == code)

    @property
    def internal(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.code not in (0, 2) or "Traceback" in o.stderr]

    @property
    def hangs(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.code == "hang"]

    def summary(self) -> str:
        slowest = max((o.seconds for o in self.outcomes), default=0.0)
        return (
            f"{len(self.outcomes)} cases: {self.count(0)} planned (exit 0), {self.count(2)} input errors "
            f"(exit 2), {len(self.internal)} internal errors, {len(self.hangs)} hangs; slowest {slowest:.1f}s"
        )


class _Hang(BaseException):  # not an Exception: main() must not catch it as an internal error
    pass


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _argv(rng: random.Random, path: Path) -> tuple[str, ...]:
    argv = ["plan", "--snapshot", str(path), "--policy", rng.choice(POLICIES)]
    argv += ["--format", rng.choice(FORMATS), "--time-limit", "2", "--deterministic"]
    if rng.random() < 0.3:
        argv.append("--explain")
    if rng.random() < 0.1:
        argv += ["--seed", rng.choice(SEEDS)]
    return tuple(argv)


def run_case(case: Case, argv_of: Any, workdir: Path) -> Outcome:
    path = workdir / f"case-{case.number}.yaml"
    path.write_bytes(case.data)
    argv = argv_of(path)
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    try:
        with _deadline(HANG_SECONDS), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | str = main(list(argv))
    except _Hang:
        code = "hang"
    except BaseException as exc:  # anything escaping main() is an internal error by definition
        code = f"escaped {type(exc).__name__}: {exc}"
    return Outcome(case, argv, code, time.perf_counter() - started, err.getvalue())


def fuzz(cases: int, seed: int, *, progress: bool = False) -> Report:
    """``cases`` mutated dumps drawn with ``seed``, each planned once (``progress``: a line per 100)."""
    rng = random.Random(seed)
    sources = corpus()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="optsched-fuzz-") as tmp:
        for number in range(cases):
            name, document = sources[number % len(sources)]
            case = mutate(rng, number, name, document)
            report.outcomes.append(run_case(case, lambda p: _argv(rng, p), Path(tmp)))
            if progress and (number + 1) % 100 == 0:
                print(f"... {report.summary()}", file=sys.stderr, flush=True)
    return report


def controller_failures(cases: int, seed: int) -> list[str]:
    """The controller's reading of mutated objects (what a tenant can write), planned by FirstFit.

    The controller gets objects from the API server, not a file, so only tree
    mutations apply; any exception out of ``build_input`` or the plan is a
    failure (the controller's loop would lose the cycle).
    """
    from optsched import planning  # deferred: planning imports OR-Tools
    from optsched.controller.inputs import build_input
    from optsched.settings import Settings

    rng = random.Random(seed)
    sources = corpus()
    failures = []
    for number in range(cases):
        name, document = sources[number % len(sources)]
        case = mutate(rng, number, name, document)
        if not isinstance(case.tree, dict):
            continue  # a mutation of the file's bytes (the API server never serves one), or no object
        objects = flatten(case.tree)
        try:
            snapshot = build_input(objects, ["optsched"]).snapshot
            planning.plan(snapshot, Settings(time_limit_s=1, workers=1), "firstfit")
        except Exception as exc:  # everything the controller's loop would not survive
            failures.append(
                f"case {number} ({name}: {'; '.join(case.mutations)}): {type(exc).__name__}: {exc}"
            )
    return failures


def describe(outcome: Outcome) -> str:
    last = outcome.stderr.strip().splitlines()[-1:] or [""]
    return (
        f"case {outcome.case.number} ({outcome.case.source}: {'; '.join(outcome.case.mutations)}) "
        f"{' '.join(outcome.argv[3:])} -> {outcome.code}: {last[0]}"
    )


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    report = fuzz(args.cases, args.seed, progress=True)
    for outcome in report.internal:
        print(describe(outcome))
    print(report.summary())
    return 1 if report.internal else 0


if __name__ == "__main__":
    sys.exit(cli())
