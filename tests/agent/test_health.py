"""XID health: application XIDs ignored, critical ones make a GPU unhealthy for good, with a reason."""

from __future__ import annotations

import pytest

from optsched.agent.devices import XidEvent
from optsched.agent.health import (
    APPLICATION_XIDS,
    HEALTHY,
    GpuHealth,
    critical_events,
    describe_xid,
    next_health,
)


@pytest.mark.parametrize("xid", sorted(APPLICATION_XIDS))
def test_application_xids_are_ignored(xid: int) -> None:
    assert critical_events([XidEvent(0, xid)]) == []


def test_the_device_plugin_list_is_the_one_ignored() -> None:
    assert frozenset({13, 31, 43, 45, 68, 109}) == APPLICATION_XIDS


def test_hardware_xids_are_kept_and_extra_ones_can_be_ignored() -> None:
    events = [XidEvent(0, 79), XidEvent(1, 13), XidEvent(2, 48), XidEvent(3, 94)]
    assert critical_events(events) == [XidEvent(0, 79), XidEvent(2, 48), XidEvent(3, 94)]
    assert critical_events(events, extra_ignored=frozenset({94})) == [XidEvent(0, 79), XidEvent(2, 48)]


def test_a_critical_xid_makes_its_gpu_unhealthy_with_the_xid_and_its_meaning() -> None:
    health = next_health({}, [XidEvent(2, 79)], gpu_count=4)
    assert health == {
        0: HEALTHY,
        1: HEALTHY,
        2: GpuHealth("Unhealthy", "XID 79 (GPU has fallen off the bus)"),
        3: HEALTHY,
    }


@pytest.mark.parametrize(
    ("xid", "words"),
    [
        (48, "double-bit ECC"),
        (63, "row remapping"),
        (64, "row remapping"),
        (74, "NVLink"),
        (94, "contained ECC"),
        (95, "uncontained ECC"),
        (119, "GSP"),
        (120, "GSP"),
    ],
)
def test_common_xids_are_explained(xid: int, words: str) -> None:
    assert describe_xid(xid).startswith(f"XID {xid} (") and words in describe_xid(xid)


def test_an_xid_without_a_known_meaning_is_named_by_its_number() -> None:
    assert next_health({}, [XidEvent(0, 150)], gpu_count=1)[0] == GpuHealth("Unhealthy", "XID 150")


def test_unhealthy_is_sticky_and_keeps_its_first_reason() -> None:
    first = next_health({}, [XidEvent(1, 48), XidEvent(1, 79)], gpu_count=2)
    assert first[1].reason == describe_xid(48)
    later = next_health(first, [], gpu_count=2)
    assert later == first
    again = next_health(later, [XidEvent(1, 95)], gpu_count=2)
    assert again[1] == GpuHealth("Unhealthy", describe_xid(48))


def test_events_for_gpus_the_node_does_not_have_are_left_out() -> None:
    assert next_health({}, [XidEvent(7, 79)], gpu_count=2) == {0: HEALTHY, 1: HEALTHY}


def test_the_result_holds_every_index_and_only_those() -> None:
    previous = {
        0: GpuHealth("Unhealthy", "XID 79 (GPU has fallen off the bus)"),
        5: GpuHealth("Unhealthy", "x"),
    }
    assert set(next_health(previous, [], gpu_count=3)) == {0, 1, 2}
    assert next_health(previous, [], gpu_count=3)[0] == previous[0]
