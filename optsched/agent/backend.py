"""The one interface every GPU backend implements: discover, report XID events, change MIG instances.

Two implementations: ``optsched.agent.nvml`` (real hardware through
``nvidia-ml-py``) and ``optsched.agent.simulated`` (a ``GPUHardwareProfile``
file, for KWOK nodes, tests and demos). The agent's loop and the MIG apply
state machine see only these protocols.
"""

from __future__ import annotations

from typing import Protocol

from optsched.agent.devices import Discovery, MigInstance, XidEvent


class BackendError(Exception):
    """A backend call failed (an NVML error, a missing device); the message says which and why."""


class MigControl(Protocol):
    """Create and destroy MIG GPU instances on one node, with explicit placements."""

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        """The GPU instances on ``gpu`` now, ordered by start."""
        ...

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        """Create a GPU instance of ``profile`` at ``start`` (and one compute instance filling it)."""
        ...

    def destroy(self, gpu: int, start: int) -> None:
        """Destroy the GPU instance starting at ``start`` (and its compute instances)."""
        ...


class GpuBackend(Protocol):
    """Discovery and events for one node's GPUs."""

    @property
    def mig(self) -> MigControl: ...

    def discover(self) -> Discovery:
        """One full discovery pass; raises :class:`BackendError` when the devices cannot be read."""
        ...

    def xid_events(self) -> list[XidEvent]:
        """The XID events since the last call (never blocks); application XIDs included, unfiltered."""
        ...

    def close(self) -> None: ...
