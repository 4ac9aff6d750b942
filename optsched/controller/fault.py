"""Fault injection for the end-to-end tests: the controller killed at one named point between two writes.

The write order of a DRA pin (the ResourceClaim, then the ungate) is built so
that a crash between the two loses nothing; only a kill at exactly that point
proves it on a real control plane. ``OPTSCHED_FAULT=<point>`` in the
controller's environment makes the process SIGKILL itself when it reaches
that point; without it, as in every deployment, :func:`reach` does nothing.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "OPTSCHED_FAULT"
AFTER_CLAIM_CREATED = "after-claim-created"
"""A pod's ResourceClaim was just created; the pod is still gated."""


def reach(point: str) -> None:
    """Kill this process at once (SIGKILL: no cleanup, like a crash) if the environment names ``point``."""
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
