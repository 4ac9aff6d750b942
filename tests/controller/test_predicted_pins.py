"""Pods on a device-plugin node get their GPUs one at a time, in the order the plan predicted."""

from __future__ import annotations

from datetime import UTC, datetime

from optsched.controller.metrics import Metrics
from optsched.controller.node_free import FreeGpus
from optsched.controller.pinning import pins_for
from optsched.controller.predicted_pins import (
    AWAIT_SECONDS,
    READ_BACK_SECONDS,
    awaited_slots,
    busy_nodes,
    in_plan_order,
    prediction_outcomes,
)
from optsched.controller.read_back import ReadBack
from optsched.controller.records import PlacementRecord
from optsched.controller.views import read_pod, read_workload
from optsched.model.names import PINNED_AT_ANNOTATION
from optsched.model.placement import Enforcement, PodPlacement
from tests.controller import objects as o

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
P = Enforcement.PREDICTED


def _slot(index: int, node: str, gpus: tuple[int, ...], order: int, how: Enforcement = P) -> PodPlacement:
    return PodPlacement(index=index, node=node, gpus=gpus, enforcement=how, node_order=order)


def _records(*records: tuple[str, PlacementRecord]):
    out = {}
    for name, record in records:
        raw = o.workload(name, check="Ready", admitted=True, record=record.to_annotation(), uid=f"uid-{name}")
        out[("default", record.plan_id)] = read_workload(raw, ["optsched"])
    return out


def _decide(pods, records, read_back=None):
    views = [read_pod(p) for p in pods]
    pins = pins_for(views, records, now="2026-01-01T00:05:00Z")
    busy = busy_nodes(views, records, read_back or ReadBack(), now=NOW)
    return in_plan_order(pins.pins, busy, records, awaited_slots(views, records, pins.pins, now=NOW))


FIRST = PlacementRecord(
    plan_id="p1",
    planned_at=100.0,
    pod_sets={"main": (_slot(0, "n1", (2, 3), 1), _slot(1, "n1", (0, 1), 0), _slot(2, "n2", (0,), 0))},
)


def test_one_predicted_pod_per_node_is_pinned_first_in_plan_order():
    pods = [o.pod(f"a-{i}", plan_id="p1", index=i) for i in range(3)]
    kept, waiting = _decide(pods, _records(("a", FIRST)))
    assert sorted((p.name, p.slot.node) for p in kept) == [("a-1", "n1"), ("a-2", "n2")]
    assert len(waiting) == 1 and waiting[0].startswith("default/a-0: waits for default/a-1")


def test_a_pinned_pod_not_bound_yet_keeps_its_node_busy():
    pods = [o.pod("a-1", plan_id="p1", gated=False, pinned_index=1), o.pod("a-0", plan_id="p1", index=0)]
    kept, waiting = _decide(pods, _records(("a", FIRST)))
    assert kept == ()
    assert "waits until pod default/a-1 on n1 has its GPUs" in waiting[0]


def test_a_bound_pod_keeps_the_node_busy_until_the_agent_lists_its_devices():
    pinned = {PINNED_AT_ANNOTATION: "2026-01-01T00:04:30Z"}
    bound = o.pod("a-1", plan_id="p1", gated=False, pinned_index=1, node="n1", annotations=pinned)
    pods = [bound, o.pod("a-0", plan_id="p1", index=0)]
    records = _records(("a", FIRST))
    assert _decide(pods, records, ReadBack.of([o.node_gpus("n1", {})]))[0] == ()
    kept, _ = _decide(pods, records, ReadBack.of([o.node_gpus("n1", {"a-1": [0, 1]})]))
    assert [p.name for p in kept] == ["a-0"]
    # A node no agent reports: bound is enough (kubelet hands devices out as it admits the pod).
    assert [p.name for p in _decide(pods, records)[0]] == ["a-0"]


def test_a_bound_pod_never_listed_stops_blocking_after_the_read_back_wait():
    stale = "2026-01-01T00:02:00Z"  # three minutes before NOW
    assert READ_BACK_SECONDS < 180
    bound = o.pod(
        "a-1", plan_id="p1", gated=False, pinned_index=1, node="n1", annotations={PINNED_AT_ANNOTATION: stale}
    )
    kept, _ = _decide(
        [bound, o.pod("a-0", plan_id="p1", index=0)],
        _records(("a", FIRST)),
        ReadBack.of([o.node_gpus("n1", {})]),
    )
    assert [p.name for p in kept] == ["a-0"]


def test_pods_of_an_older_record_go_first_and_other_enforcement_is_not_held_back():
    later = PlacementRecord(
        plan_id="p2",
        planned_at=200.0,
        pod_sets={"main": (_slot(0, "n1", (4, 5), 0), _slot(1, "n1", (6,), 1, Enforcement.DRA))},
    )
    pods = [o.pod("b-0", plan_id="p2", index=0), o.pod("b-1", plan_id="p2", index=1)]
    pods += [o.pod("a-0", plan_id="p1", index=0)]
    kept, _ = _decide(pods, _records(("a", FIRST), ("b", later)))
    assert sorted(p.name for p in kept) == ["a-0", "b-1"]


def test_bound_predicted_pods_are_counted_as_agreed_drifted_or_unconfirmed():
    records = _records(("a", FIRST))
    pods = [
        read_pod(o.pod("a-0", plan_id="p1", gated=False, pinned_index=0, node="n1")),
        read_pod(o.pod("a-1", plan_id="p1", gated=False, pinned_index=1, node="n1")),
        read_pod(o.pod("a-2", plan_id="p1", gated=False, pinned_index=2, node="n2")),
    ]
    read_back = ReadBack.of([o.node_gpus("n1", {"a-0": [3, 2], "a-1": [4, 5]})])
    counts = prediction_outcomes(pods, records.values(), read_back)
    assert counts == {"agreed": 1, "drifted": 1, "unconfirmed": 1}
    metrics = Metrics()
    metrics.observe_predictions(counts)
    assert metrics.registry.get_sample_value("optsched_prediction_drift_ratio") == 0.5


def _fresh(record: PlacementRecord, seconds_ago: float) -> PlacementRecord:
    return record.model_copy(update={"planned_at": NOW.timestamp() - seconds_ago})


def test_a_slot_whose_pod_is_not_created_yet_holds_back_the_pods_after_it_on_its_node():
    records = _records(("a", _fresh(FIRST, 5)))
    kept, waiting = _decide([o.pod("a-0", plan_id="p1", index=0)], records)
    assert kept == (), "a-1 comes first on n1 and its pod does not exist yet"
    assert waiting == (
        "default/a-0: waits for the pod of default/a main[1], planned before it on n1, to be created",
    )


def test_a_pod_ahead_of_the_missing_one_and_pods_on_other_nodes_go():
    records = _records(("a", _fresh(FIRST, 5)))
    kept, waiting = _decide(
        [o.pod("a-1", plan_id="p1", index=1), o.pod("a-2", plan_id="p1", index=2)], records
    )
    assert sorted(p.name for p in kept) == ["a-1", "a-2"]
    assert waiting == ()


def test_a_slot_taken_by_a_live_pod_is_not_awaited():
    records = _records(("a", _fresh(FIRST, 5)))
    done = o.pod("a-1", plan_id="p1", gated=False, pinned_index=1, node="n1")
    kept, _ = _decide([done, o.pod("a-0", plan_id="p1", index=0)], records)
    assert [p.name for p in kept] == ["a-0"]


def test_a_slot_that_never_gets_a_pod_stops_holding_back_after_the_wait():
    stale = _records(("a", _fresh(FIRST, AWAIT_SECONDS + 1)))
    kept, _ = _decide([o.pod("a-0", plan_id="p1", index=0)], stale)
    assert [p.name for p in kept] == ["a-0"]


def test_the_awaited_slot_is_the_first_in_the_node_order_across_records():
    later = PlacementRecord(
        plan_id="p2", planned_at=NOW.timestamp() - 2, pod_sets={"main": (_slot(0, "n1", (4, 5), 0),)}
    )
    records = _records(("a", _fresh(FIRST, 5)), ("b", later))
    views = [read_pod(o.pod("b-0", plan_id="p2", index=0))]
    awaited = awaited_slots(views, records, (), now=NOW)
    assert {node: who for node, (_key, who) in awaited.items()} == {
        "n1": "default/a main[1]",
        "n2": "default/a main[2]",
    }


PAIRS_TOPOLOGY = '{"nvlinkIslands": [[0, 1], [2, 3], [4, 5], [6, 7]]}'


def test_what_is_free_now_counts_bound_pods_only():
    bound = o.pod(
        "x", plan_id=None, gated=False, node="a100", gpus=2, annotations={"optsched.io/gpus": "0,1"}
    )
    free = FreeGpus([o.node("a100", topology=PAIRS_TOPOLOGY), bound, o.node_gpus("a100", {"x": [2, 3]})])
    now = free("a100")
    assert now is not None and now.free == frozenset({0, 1, 4, 5, 6, 7}), "the agent's read-back wins"
    assert free("missing") is None


def test_the_pin_whose_gpus_are_the_pick_now_goes_first_whatever_the_order():
    # "four" was planned first (GPUs 0-3) but its record was written a cycle late, after "twos" (4,5).
    twos = PlacementRecord(plan_id="p1", planned_at=100.0, pod_sets={"main": (_slot(0, "a100", (4, 5), 1),)})
    four = PlacementRecord(
        plan_id="p2", planned_at=200.0, pod_sets={"main": (_slot(0, "a100", (0, 1, 2, 3), 0),)}
    )
    records = _records(("twos", twos), ("four", four))
    pods = [o.pod("twos-0", plan_id="p1", index=0), o.pod("four-0", plan_id="p2", index=0)]
    views = [read_pod(p) for p in pods]
    pins = pins_for(views, records, now="2026-01-01T00:05:00Z").pins
    by_order, _ = in_plan_order(pins, {}, records)
    assert [p.name for p in by_order] == ["twos-0"]
    free = FreeGpus([o.node("a100", topology=PAIRS_TOPOLOGY)])
    by_pick, waiting = in_plan_order(pins, {}, records, None, free)
    assert [p.name for p in by_pick] == ["four-0"]
    assert waiting == (
        "default/twos-0: waits for default/four-0, whose GPUs are the device plugin's pick on a100 now",
    )


def test_pins_that_are_not_the_pick_now_wait_a_while_for_the_pod_planned_before_them():
    # "twos" is planned after a 4-GPU pod whose record is not written yet: GPUs 4,5 are not the pick now.
    twos = PlacementRecord(
        plan_id="p1", planned_at=NOW.timestamp() - 5, pod_sets={"main": (_slot(0, "a100", (4, 5), 1),)}
    )
    records = _records(("twos", twos))
    views = [read_pod(o.pod("twos-0", plan_id="p1", index=0))]
    pins = pins_for(views, records, now="2026-01-01T00:05:00Z").pins
    free = FreeGpus([o.node("a100", topology=PAIRS_TOPOLOGY)])
    kept, waiting = in_plan_order(pins, {}, records, None, free, NOW)
    assert kept == () and "waiting up to 30s" in waiting[0]
    later = datetime.fromtimestamp(NOW.timestamp() + 60, tz=UTC)
    assert [p.name for p in in_plan_order(pins, {}, records, None, free, later)[0]] == ["twos-0"]
