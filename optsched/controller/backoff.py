"""Per-key back-off of a write that must wait for the cluster (a claim still being deleted).

A pin whose claim is being deleted (its previous pod still terminating)
cannot go on until the deletion ends, which may take as long as the pod's
grace period. Retrying it at the pin pass's rate would keep a loop of reads
going for as long; instead each key waits :data:`FIRST_S`, then twice as
long each time it is found waiting again, up to :data:`MOST_S`, and is
forgotten once its write goes through.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_S = 1.0
MOST_S = 30.0
KEPT = 4096
"""The most keys remembered (expired ones are dropped first)."""


class Backoff:
    """When each key may be tried again, and its next delay."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._until: dict[str, tuple[float, float]] = {}
        """key -> (monotonic time it may be tried again, the delay it waited)."""

    def holds(self, key: str) -> bool:
        """Whether ``key`` must not be tried yet."""
        found = self._until.get(key)
        return found is not None and self.clock() < found[0]

    def hold(self, key: str) -> float:
        """``key`` had to wait again: hold it for its next delay (returned, in seconds)."""
        now = self.clock()
        if len(self._until) >= KEPT:
            self._until = {k: v for k, v in self._until.items() if v[0] > now}
            if len(self._until) >= KEPT:
                self._until.clear()
        previous = self._until.get(key)
        delay = FIRST_S if previous is None else min(previous[1] * 2, MOST_S)
        self._until[key] = (now + delay, delay)
        return delay

    def clear(self, key: str) -> None:
        """``key``'s write went through."""
        self._until.pop(key, None)
