"""GPU health from XID errors: which events make a GPU unhealthy, and that it stays so.

NVML reports XID critical errors per GPU. Some are caused by the application
(an illegal memory access, a graphics engine exception, a reset channel), not
the hardware; like NVIDIA's device plugin, those are ignored. Any other XID
marks the GPU unhealthy, and only a person (a reset, a reboot, a replaced
board) can undo that: the agent never turns a GPU healthy again, so the
planner stops placing on it until the agent restarts on repaired hardware.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from optsched.agent.devices import XidEvent

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs an application causes, ignored as NVIDIA's device plugin ignores them (13 graphics engine
exception, 31 memory page fault, 43 reset channel, 45 preemptive cleanup, 68 video processor
exception, 109 context switch timeout)."""

XID_MEANINGS: Mapping[int, str] = {
    48: "double-bit ECC error (DBE)",
    61: "internal micro-controller breakpoint or warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
"""Short meanings of the common hardware XIDs, after NVIDIA's XID catalogue."""


@dataclass(frozen=True)
class GpuHealth:
    """A GPU's health as published (``NodeGPUs`` ``status.gpus[].health``)."""

    state: Literal["Healthy", "Unhealthy"]
    reason: str = ""


HEALTHY = GpuHealth("Healthy")


def describe_xid(xid: int) -> str:
    """``XID 79 (GPU has fallen off the bus)``, or ``XID 150`` for one without a known meaning."""
    meaning = XID_MEANINGS.get(xid)
    return f"XID {xid} ({meaning})" if meaning else f"XID {xid}"


def critical_events(
    events: Iterable[XidEvent], extra_ignored: frozenset[int] = frozenset()
) -> list[XidEvent]:
    """The events that make a GPU unhealthy: all but the application XIDs and ``extra_ignored``."""
    ignored = APPLICATION_XIDS | extra_ignored
    return [event for event in events if event.xid not in ignored]


def next_health(
    previous: Mapping[int, GpuHealth], events: Iterable[XidEvent], gpu_count: int
) -> dict[int, GpuHealth]:
    """Health per GPU index after ``events`` (already filtered by :func:`critical_events`).

    A GPU unhealthy before stays unhealthy with its first reason; a healthy
    one becomes unhealthy on its first event here. Events for indices the
    node does not have are left out.
    """
    health = {index: previous.get(index, HEALTHY) for index in range(gpu_count)}
    for event in events:
        current = health.get(event.gpu_index)
        if current is None or current.state == "Unhealthy":
            continue
        health[event.gpu_index] = GpuHealth("Unhealthy", describe_xid(event.xid))
    return health
