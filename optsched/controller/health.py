"""Liveness from progress: the loop beats a heartbeat; ``/healthz`` fails once it was silent too long.

A probe on an open port only says the process is there; a controller whose
cycle hangs on an API call (a half-open connection) or inside the planner
would stay "alive" forever and admit nothing. The loop beats when a cycle
finishes and when the wait between cycles has run (a follower, which does
not cycle, beats too); the metrics server's ``/healthz`` answers 500 once no
beat came for longer than :func:`liveness_bound`, so the kubelet restarts a
wedged replica. Time is the monotonic clock: no wall-clock change can make a
healthy replica look silent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from optsched.controller.options import Options
from optsched.settings import Settings

LIVENESS_FACTOR = 3
"""How many of the longest possible cycles may pass without a beat before the replica counts as hung."""


def liveness_bound(options: Options, settings: Settings, request_timeout_s: float) -> float:
    """Seconds without progress after which a replica is hung.

    The longest healthy stretch without a beat is a wait of ``interval``
    followed by a cycle whose read waits for the caches (``sync_timeout``),
    whose plan uses the solver's whole budget (``time_limit_s``) and whose
    writes each take up to a request timeout; :data:`LIVENESS_FACTOR` of
    those is well past anything but a hang.
    """
    longest = options.interval + options.sync_timeout + settings.time_limit_s + request_timeout_s
    return float(LIVENESS_FACTOR * longest)


@dataclass(frozen=True)
class Health:
    """What ``/healthz`` answers."""

    healthy: bool
    silent_s: float
    """Seconds since the last beat."""
    bound_s: float

    @property
    def message(self) -> str:
        if self.healthy:
            return "ok"
        return f"no progress for {self.silent_s:.0f}s (bound {self.bound_s:.0f}s): the control loop is stuck"


class Heartbeat:
    """The last time the loop made progress, read from the metrics server's thread."""

    def __init__(self, bound_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if bound_s <= 0:
            raise ValueError(f"the liveness bound must be positive, got {bound_s}")
        self.bound_s = bound_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last = clock()

    def beat(self) -> None:
        with self._lock:
            self._last = self._clock()

    def health(self) -> Health:
        with self._lock:
            silent = max(0.0, self._clock() - self._last)
        return Health(healthy=silent <= self.bound_s, silent_s=silent, bound_s=self.bound_s)
