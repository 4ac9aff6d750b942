"""What the soak tells: a progress line per fault and per violation, periodic summaries, a JSON report.

Thread-safe: the fault, stream and checker threads all write here. The last
line of the soak's output is :func:`final_line`, exactly
``chaos: W workloads, F faults, O over-committed, L lost, S stuck, E escapes``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from e2e.chaos.invariants import Violation

COUNTED = ("O", "L", "S", "E")


@dataclass(frozen=True)
class Totals:
    workloads: int
    faults: int
    over_committed: int
    lost: int
    stuck: int
    escapes: int

    @property
    def clean(self) -> bool:
        return not (self.over_committed or self.lost or self.stuck or self.escapes)


def final_line(totals: Totals) -> str:
    return (
        f"chaos: {totals.workloads} workloads, {totals.faults} faults, "
        f"{totals.over_committed} over-committed, "
        f"{totals.lost} lost, {totals.stuck} stuck, {totals.escapes} escapes"
    )


@dataclass
class Report:
    seed: int
    minutes: float
    path: Path | None = None
    out: TextIO = field(default=sys.stdout)
    started: float = field(default_factory=time.monotonic)
    faults: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    attacks: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return round(time.monotonic() - self.started, 1)

    @staticmethod
    def clock() -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds")

    def say(self, text: str) -> None:
        with self._lock:
            print(f"[{self.now():7.1f}s] {text}", file=self.out, flush=True)

    def fault(self, kind: str, detail: str, **data: Any) -> dict[str, Any]:
        """A fault injected now; the returned entry gets its ``ended`` time from :meth:`fault_ended`."""
        entry = {"at": self.now(), "time": self.clock(), "kind": kind, "detail": detail, **data}
        with self._lock:
            self.faults.append(entry)
        self.say(f"fault {kind}: {detail}")
        return entry

    def fault_ended(self, entry: dict[str, Any], detail: str) -> None:
        with self._lock:
            entry["ended"] = self.now()
            entry["endedTime"] = self.clock()
            entry["recovery"] = detail
        self.say(f"fault {entry['kind']} over: {detail}")

    def violation(self, v: Violation, active: list[str]) -> None:
        entry = {
            "at": self.now(),
            "time": self.clock(),
            **asdict(v),
            "objects": list(v.objects),
            "activeFaults": active,
        }
        with self._lock:
            self.violations.append(entry)
        during = f" (during {', '.join(active)})" if active else ""
        label = f"VIOLATION {v.kind}" if v.kind in COUNTED else "NOTE"
        self.say(f"{label} {v.rule}: {v.message}{during}")

    def workload(self, key: str, kind: str, actor: str, detail: str) -> None:
        with self._lock:
            self.workloads.append(
                {
                    "at": self.now(),
                    "time": self.clock(),
                    "workload": key,
                    "kind": kind,
                    "actor": actor,
                    "detail": detail,
                }
            )

    def attack(self, kind: str, outcome: str, **data: Any) -> None:
        with self._lock:
            self.attacks.append(
                {"at": self.now(), "time": self.clock(), "attack": kind, "outcome": outcome, **data}
            )
        self.say(f"tenant {kind}: {outcome}")

    def summary(self, phases: Counter[str], extra: str = "") -> None:
        counts = self.counts()
        entry = {"at": self.now(), "phases": dict(phases), **counts}
        with self._lock:
            self.summaries.append(entry)
        shown = ", ".join(f"{v} {k}" for k, v in sorted(phases.items()))
        found = " ".join(f"{k}={counts[k]}" for k in COUNTED)
        self.say(
            f"summary: {len(self.workloads)} workloads ({shown or 'none seen yet'}); "
            f"{len(self.faults)} faults; {found}{extra}"
        )

    def counts(self) -> dict[str, int]:
        with self._lock:
            found = Counter(v["kind"] for v in self.violations)
        return {k: found.get(k, 0) for k in COUNTED}

    def totals(self) -> Totals:
        counts = self.counts()
        return Totals(
            len(self.workloads), len(self.faults), counts["O"], counts["L"], counts["S"], counts["E"]
        )

    def write(self) -> None:
        if self.path is None:
            return
        totals = self.totals()
        doc = {
            "seed": self.seed,
            "minutes": self.minutes,
            "line": final_line(totals),
            "totals": asdict(totals),
            "faults": self.faults,
            "violations": self.violations,
            "attacks": self.attacks,
            "workloads": self.workloads,
            "summaries": self.summaries,
            **self.notes,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
