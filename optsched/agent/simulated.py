"""A GPU backend driven by a hardware profile: simulated nodes (KWOK, tests, demos).

It discovers what the profile describes, with the identities a real node
would have: a UUID per (node, index) that never changes between runs, a PCI
bus id (and PCIe root) per index, minor number = index. MIG instances come from the
``MigControl`` it is given (the MIG simulator), or there are none.

XID errors are injected through a file, so a test or an e2e run can make a
GPU of a running agent fail: :func:`inject_xid` appends one JSON line to
``<state_dir>/xid-events.jsonl`` and the backend's ``xid_events`` returns the
lines written since its last call. The file is read from its start when the
backend starts, so an agent restarted on the same state still sees the GPUs
that failed (as on a real node, where the broken GPU stays broken).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TypeGuard

from optsched.agent.backend import BackendError, MigControl
from optsched.agent.devices import Discovery, GpuDevice, MigInstance, XidEvent
from optsched.agent.profile import HardwareProfile

SIMULATED_DRIVER_VERSION = "580.65.06"
"""The driver version every simulated node reports (a real R580 release, so version parsers work)."""
XID_FILE = "xid-events.jsonl"
_UUID_NAMESPACE = uuid.UUID("5b1f9a3e-6c2d-4e8f-9a7b-0c1d2e3f4a5b")
_GPUS_PER_DOMAIN = 32


def simulated_uuid(node: str, index: int) -> str:
    """``GPU-<uuid5>``: the same for a (node, index) on every run and in every process."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"


def simulated_bus_id(index: int) -> str:
    """A PCI bus id in NVML's form (``00000000:10:00.0``), distinct per index."""
    domain, slot = divmod(index, _GPUS_PER_DOMAIN)
    return f"{domain:08X}:{0x10 + slot * 7:02X}:00.0"


def simulated_pcie_root(index: int) -> str:
    """The PCIe root complex (``pci0000:10``): GPUs 2k and 2k+1 share one, as behind one PCIe switch."""
    domain, slot = divmod(index, _GPUS_PER_DOMAIN)
    return f"pci{domain:04x}:{0x10 + (slot // 2) * 14:02x}"


class NoMig:
    """The MIG control of a node without a MIG simulator: no instances, and changes refused."""

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        return ()

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        raise BackendError("MIG is not simulated on this node")

    def destroy(self, gpu: int, start: int) -> None:
        raise BackendError("MIG is not simulated on this node")


class SimulatedBackend:
    """``GpuBackend`` for one simulated node described by a hardware profile."""

    def __init__(
        self,
        profile: HardwareProfile,
        node: str,
        state_dir: Path | None = None,
        mig: MigControl | None = None,
    ) -> None:
        self.profile = profile
        self.node = node
        self.state_dir = state_dir
        self._mig: MigControl = mig if mig is not None else NoMig()
        self._xid_offset = 0

    @property
    def mig(self) -> MigControl:
        return self._mig

    def discover(self) -> Discovery:
        profile = self.profile
        gpus = tuple(self._device(index) for index in range(profile.count))
        return Discovery(
            gpus=gpus,
            nvlinks=profile.links,
            nvswitch=frozenset(range(profile.count)) if profile.switch else frozenset(),
            driver_version=SIMULATED_DRIVER_VERSION,
        )

    def _device(self, index: int) -> GpuDevice:
        profile = self.profile
        instances = self._mig.instances(index) if profile.mig_capable else ()
        return GpuDevice(
            index=index,
            minor=index,
            uuid=simulated_uuid(self.node, index),
            pci_bus_id=simulated_bus_id(index),
            product=profile.product,
            memory_mib=profile.memory_mib,
            numa=profile.numa[index] if profile.numa is not None else None,
            mig_capable=profile.mig_capable,
            mig_enabled=bool(instances),
            mig_instances=instances,
            clique=profile.clique,
        )

    def xid_events(self) -> list[XidEvent]:
        """The events appended to the XID file since the last call; a torn last line waits for its end."""
        if self.state_dir is None:
            return []
        path = self.state_dir / XID_FILE
        try:
            with path.open("rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                if size < self._xid_offset:
                    self._xid_offset = 0
                stream.seek(self._xid_offset)
                data = stream.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise BackendError(f"cannot read injected XID events from {path}: {exc.strerror or exc}") from exc
        complete = data[: data.rfind(b"\n") + 1]
        self._xid_offset += len(complete)
        events = (_event(line) for line in complete.splitlines())
        return [event for event in events if event is not None and event.gpu_index < self.profile.count]

    def close(self) -> None:
        return None


def inject_xid(state_dir: Path, gpu: int, xid: int, message: str = "") -> None:
    """Append an XID event for ``gpu`` to the node's XID file (one write, so readers never see half)."""
    if gpu < 0 or xid < 0:
        raise ValueError(f"gpu and xid must not be negative, got gpu={gpu} xid={xid}")
    state_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"gpu": gpu, "xid": xid, "message": message}) + "\n"
    fd = os.open(state_dir / XID_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _event(line: bytes) -> XidEvent | None:
    """One line as an event, or None for a line that is not one (it is skipped)."""
    try:
        raw = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict):
        return None
    gpu, xid, message = raw.get("gpu"), raw.get("xid"), raw.get("message", "")
    if not (_natural(gpu) and _natural(xid) and isinstance(message, str)):
        return None
    return XidEvent(gpu_index=gpu, xid=xid, message=message)


def _natural(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
