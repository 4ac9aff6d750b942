"""The wall clock, injected: the controller reads the time of day through a :data:`Clock` only.

Kubernetes timestamps (our check's ``lastTransitionTime``, the Lease's renew
time, Events) and the deferral hold all come from one injected clock, so tests
fix the time and nothing else reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)
