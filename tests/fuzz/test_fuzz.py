"""Mutated real-world dumps never end in an internal error, a traceback or a hang.

A few hundred cases drawn with a fixed seed (``python -m tests.fuzz.run
--cases N --seed S`` runs more and prints the figures). Each case must exit 0
(planned, perhaps with warnings) or 2 (the file named as unreadable).
"""

from __future__ import annotations

from tests.fuzz.run import controller_failures, describe, fuzz

CASES = 300
SEED = 20261201


def test_mutated_dumps_end_in_a_plan_or_a_named_input_error() -> None:
    report = fuzz(CASES, SEED)
    print(report.summary())
    assert [describe(o) for o in report.internal] == []
    assert report.hangs == []
    assert len(report.outcomes) == CASES
    # The mutations reach both outcomes: most inputs still plan, some files are unreadable.
    assert report.count(0) > CASES // 2 and report.count(2) > 0


def test_the_controller_reads_mutated_objects_without_raising() -> None:
    assert controller_failures(300, SEED) == []
