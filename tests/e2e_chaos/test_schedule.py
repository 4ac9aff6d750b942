"""The fault and attack timelines: every class in a short run, seeded, inside the run."""

from __future__ import annotations

from e2e.chaos.schedule import FaultKind, fault_schedule
from e2e.chaos.tenants import KINDS, attack_times


def test_a_three_minute_run_meets_every_fault_class_in_order_and_inside_the_run() -> None:
    faults = fault_schedule(1, 180)
    assert {f.kind for f in faults} == set(FaultKind)
    assert [f.at for f in faults] == sorted(f.at for f in faults)
    assert all(0 < f.at < 180 for f in faults)
    first_round = [f for f in faults if f.at < 180 * 0.8]
    assert len({f.kind for f in first_round}) == len(FaultKind)


def test_the_same_seed_gives_the_same_timeline_and_another_seed_another() -> None:
    assert fault_schedule(7, 600) == fault_schedule(7, 600)
    assert fault_schedule(7, 600) != fault_schedule(8, 600)


def test_a_long_run_keeps_injecting_after_the_first_round() -> None:
    faults = fault_schedule(3, 1800, mean_gap=20)
    late = [f for f in faults if f.at > 1800 * 0.8]
    assert len(late) > 5
    assert len(faults) > len(FaultKind) + 5


def test_a_subset_of_classes_is_honoured_and_an_empty_run_has_no_faults() -> None:
    kinds = (FaultKind.NODE_DELETE, FaultKind.API_DROP)
    assert {f.kind for f in fault_schedule(1, 300, kinds=kinds)} == set(kinds)
    assert fault_schedule(1, 0) == ()


def test_the_tenant_tries_every_attack_early_and_keeps_trying() -> None:
    attacks = attack_times(1, 180)
    assert {kind for t, kind in attacks if t < 100} == set(KINDS)
    assert attacks == attack_times(1, 180) and all(0 < t < 180 for t, _ in attacks)
