"""The fault proxy's decisions: which requests get which fault, and the answers look like the API server's."""

from __future__ import annotations

import json
import random

from e2e.chaos.policy import PASS, Action, Fault, Mode, decide, is_watch

PODS = "/api/v1/namespaces/team/pods/p-0"
WATCH = "/api/v1/pods?watch=true&resourceVersion=10"


def test_no_fault_or_a_zero_share_passes_everything() -> None:
    rng = random.Random(1)
    assert decide("PATCH", PODS, Mode(), rng) == PASS
    assert decide("PATCH", PODS, Mode(Fault.ERROR, 0.0), rng) == PASS


def test_conflicts_hit_writes_only_with_a_status_body() -> None:
    mode = Mode(Fault.CONFLICT, 1.0)
    rng = random.Random(1)
    assert decide("GET", PODS, mode, rng) == PASS
    answer = decide("PATCH", PODS, mode, rng)
    body = json.loads(answer.body)
    assert (answer.action, answer.status, body["reason"], body["code"]) == (
        Action.RESPOND,
        409,
        "Conflict",
        409,
    )
    assert "pods/p-0" in body["message"]


def test_throttling_carries_retry_after_in_the_header_and_the_details() -> None:
    answer = decide("GET", PODS, Mode(Fault.THROTTLE, 1.0, retry_after=3), random.Random(1))
    assert answer.status == 429 and ("Retry-After", "3") in answer.headers
    assert json.loads(answer.body)["details"] == {"retryAfterSeconds": 3}


def test_hangs_hold_for_the_mode_s_time_and_drops_cut_watches_part_way() -> None:
    assert decide("GET", PODS, Mode(Fault.HANG, 1.0, hang_seconds=42), random.Random(1)).seconds == 42
    assert decide("GET", PODS, Mode(Fault.DROP, 1.0), random.Random(1)).action is Action.DROP
    cut = decide("GET", WATCH, Mode(Fault.DROP, 1.0), random.Random(1))
    assert cut.action is Action.CUT and 0 < cut.seconds <= 5


def test_the_share_of_faulted_requests_follows_the_probability() -> None:
    rng = random.Random(5)
    hits = sum(decide("GET", PODS, Mode(Fault.ERROR, 0.3), rng).action is Action.RESPOND for _ in range(2000))
    assert 500 < hits < 700


def test_watch_requests_are_recognised_by_their_query() -> None:
    assert is_watch(WATCH) and is_watch("/apis/x/v1/things?watch=1")
    assert not is_watch(PODS) and not is_watch("/api/v1/pods?watch=false")
