"""What discovery finds on one node, as plain values every backend returns alike.

Both backends (NVML and simulated) produce a :class:`Discovery`; everything
downstream (islands, the annotation, ``NodeGPUs``, GFD-style labels) is
computed from it, so a simulated node and a real one publish through the same
code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MigInstance:
    """One MIG GPU instance: its profile (``1g.10gb``), where it sits on the 8-slice memory axis."""

    profile: str
    start: int
    size: int
    uuid: str = ""
    in_use: bool = False


@dataclass(frozen=True)
class GpuDevice:
    """One physical GPU as NVML (or a hardware profile) describes it."""

    index: int
    minor: int
    uuid: str
    pci_bus_id: str
    """As NVML prints it: ``00000000:18:00.0``."""
    product: str
    """GFD's form of the name: spaces become dashes, e.g. ``NVIDIA-H100-80GB-HBM3``."""
    memory_mib: int
    numa: int | None = None
    mig_capable: bool = False
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()
    clique: str | None = None
    """``<clusterUUID>.<cliqueId>`` from NVML fabric info (GB200 NVL72 and the like), else None."""


@dataclass(frozen=True)
class NvLink:
    """Point-to-point NVLinks between two GPUs (``a < b``), ``count`` links bonded."""

    a: int
    b: int
    count: int


@dataclass(frozen=True)
class Discovery:
    """Everything one discovery pass found on a node."""

    gpus: tuple[GpuDevice, ...]
    nvlinks: tuple[NvLink, ...] = ()
    nvswitch: frozenset[int] = field(default_factory=frozenset)
    """GPUs whose enabled NVLinks end at an NVSwitch: all of them are fully connected."""
    driver_version: str = ""

    def by_index(self, index: int) -> GpuDevice:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(index)


@dataclass(frozen=True)
class XidEvent:
    """An NVML XID error event on one GPU (application XIDs are filtered by ``optsched.agent.health``)."""

    gpu_index: int
    xid: int
    message: str = ""
