"""The blackout clock: seconds with no controller or no API server are summed once, however they overlap."""

from __future__ import annotations

from e2e.chaos.replicas import Blackout


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_overlapping_reasons_count_their_union_and_nothing_after() -> None:
    clock = Clock()
    blackout = Blackout(now=clock)
    assert blackout.total() == 0
    blackout.set("no-controller", True)
    clock.t += 5
    blackout.set("apiserver", True)
    clock.t += 5
    assert blackout.total() == 10, "a blackout in progress counts up to now"
    blackout.set("no-controller", False)
    clock.t += 5
    blackout.set("apiserver", False)
    clock.t += 30
    assert blackout.total() == 15
    blackout.set("apiserver", True)
    blackout.set("apiserver", True)
    clock.t += 2
    blackout.set("apiserver", False)
    assert blackout.total() == 17
