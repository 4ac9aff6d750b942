"""The GPU backend for real nodes: discovery and XID events through NVML (nvidia-ml-py).

Per GPU it reads the index, minor number, UUID, PCI bus id, product name (in
GPU Feature Discovery's form), memory, NUMA node, MIG mode and instances and
the fabric clique. NVLinks are read link by link: a link whose far end is an
NVSwitch puts the GPU on the switch board (all such GPUs are fully
connected); a link to another GPU is matched to that GPU by its PCI bus id and
counted. XID critical-error events are registered for every GPU that supports
them when the backend starts and are polled without blocking.
"""

from __future__ import annotations

import contextlib
import ctypes
import uuid
from collections.abc import Iterator
from typing import Any

from optsched.agent.backend import BackendError
from optsched.agent.devices import Discovery, GpuDevice, NvLink, XidEvent
from optsched.agent.nvml_calls import NOT_SUPPORTED, Absent, NvmlCalls, load_nvml, text
from optsched.agent.nvml_mig import NvmlMig

MAX_EVENTS_PER_POLL = 4096
"""``xid_events`` returns after this many events, so a storm of events cannot hold the agent's loop."""
_SWITCH = -1
_NO_LINK = ("NotSupported", "InvalidArgument")


class NvmlBackend:
    """``GpuBackend`` over NVML; ``nvml`` is the ``pynvml`` module (imported when None) or a fake of it."""

    def __init__(self, nvml: Any = None) -> None:
        module = load_nvml(nvml)
        self._calls = NvmlCalls(module)
        self._closed = False
        try:
            count = int(self._calls.call("nvmlDeviceGetCount"))
            self._handles = [self._calls.call("nvmlDeviceGetHandleByIndex", i, gpu=i) for i in range(count)]
            self._event_set = self._register_xid_events()
        except BackendError:
            self.close()
            raise
        self._mig = NvmlMig(self._calls, self._handles)

    @property
    def mig(self) -> NvmlMig:
        return self._mig

    def discover(self) -> Discovery:
        gpus = tuple(self._device(index) for index in range(len(self._handles)))
        nvlinks, nvswitch = self._links(gpus)
        return Discovery(
            gpus=gpus,
            nvlinks=nvlinks,
            nvswitch=nvswitch,
            driver_version=text(self._calls.call("nvmlSystemGetDriverVersion")),
        )

    def _device(self, index: int) -> GpuDevice:
        call, handle = self._calls.call, self._handles[index]
        try:
            minor = int(call("nvmlDeviceGetMinorNumber", handle, gpu=index, absent=NOT_SUPPORTED))
        except Absent:
            minor = index
        capable, enabled = self._mig_mode(index)
        return GpuDevice(
            index=index,
            minor=minor,
            uuid=text(call("nvmlDeviceGetUUID", handle, gpu=index)),
            pci_bus_id=text(call("nvmlDeviceGetPciInfo", handle, gpu=index).busId),
            product=text(call("nvmlDeviceGetName", handle, gpu=index)).strip().replace(" ", "-"),
            memory_mib=int(call("nvmlDeviceGetMemoryInfo", handle, gpu=index).total) // 2**20,
            numa=self._numa(index),
            mig_capable=capable,
            mig_enabled=enabled,
            mig_instances=self._mig.instances(index) if enabled else (),
            clique=self._clique(index),
        )

    def _numa(self, index: int) -> int | None:
        try:
            node = int(
                self._calls.call(
                    "nvmlDeviceGetNumaNodeId", self._handles[index], gpu=index, absent=NOT_SUPPORTED
                )
            )
        except Absent:
            return None
        return node if node >= 0 else None

    def _mig_mode(self, index: int) -> tuple[bool, bool]:
        """(MIG capable, MIG enabled now)."""
        try:
            current, _pending = self._calls.call(
                "nvmlDeviceGetMigMode", self._handles[index], gpu=index, absent=NOT_SUPPORTED
            )
        except Absent:
            return False, False
        return True, int(current) == self._calls.constant("NVML_DEVICE_MIG_ENABLE")

    def _clique(self, index: int) -> str | None:
        """``<clusterUUID>.<cliqueId>`` once the GPU's fabric registration completed, else None."""
        nvml, handle = self._calls.nvml, self._handles[index]
        attempts = (
            ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
            ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
        )
        for function, structure in attempts:
            if not hasattr(nvml, function) or not hasattr(nvml, structure):
                continue
            info = getattr(nvml, structure)()
            try:
                self._calls.call(
                    function,
                    handle,
                    ctypes.byref(info),
                    gpu=index,
                    absent=("NotSupported", "FunctionNotFound"),
                )
            except Absent as absent:
                if absent.kind == "NotSupported":
                    return None
                continue
            return _clique_of(nvml, info)
        return None

    def _links(self, gpus: tuple[GpuDevice, ...]) -> tuple[tuple[NvLink, ...], frozenset[int]]:
        by_bus = {_bus_key(gpu.pci_bus_id): gpu.index for gpu in gpus}
        counts: dict[tuple[int, int], int] = {}
        switched: set[int] = set()
        for gpu in gpus:
            for end in self._link_ends(gpu.index):
                if end == _SWITCH:
                    switched.add(gpu.index)
                    continue
                peer = by_bus.get(end)
                if peer is not None and peer > gpu.index:
                    counts[(gpu.index, peer)] = counts.get((gpu.index, peer), 0) + 1
        links = tuple(NvLink(a, b, n) for (a, b), n in sorted(counts.items()))
        return links, frozenset(switched)

    def _link_ends(self, index: int) -> Iterator[object]:
        """Per active NVLink of the GPU: ``_SWITCH``, or the bus key of the GPU at its far end."""
        call, handle = self._calls.call, self._handles[index]
        enabled = self._calls.constant("NVML_FEATURE_ENABLED")
        to_switch = self._calls.constant("NVML_NVLINK_DEVICE_TYPE_SWITCH")
        to_gpu = self._calls.constant("NVML_NVLINK_DEVICE_TYPE_GPU")
        for link in range(self._calls.constant("NVML_NVLINK_MAX_LINKS")):
            try:
                if int(call("nvmlDeviceGetNvLinkState", handle, link, gpu=index, absent=_NO_LINK)) != enabled:
                    continue
            except Absent as absent:
                if absent.kind == "InvalidArgument":
                    return
                continue
            try:
                kind = int(
                    call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link, gpu=index, absent=NOT_SUPPORTED)
                )
            except Absent:
                kind = to_gpu
            if kind == to_switch:
                yield _SWITCH
            elif kind == to_gpu:
                remote = call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link, gpu=index)
                yield _bus_key(text(remote.busId))

    def _register_xid_events(self) -> Any:
        """An event set with every GPU that supports XID events registered, or None where NVML has none."""
        try:
            event_set = self._calls.call("nvmlEventSetCreate", absent=NOT_SUPPORTED)
        except Absent:
            return None
        xid = self._calls.constant("nvmlEventTypeXidCriticalError")
        for index, handle in enumerate(self._handles):
            try:
                self._calls.call(
                    "nvmlDeviceRegisterEvents", handle, xid, event_set, gpu=index, absent=NOT_SUPPORTED
                )
            except Absent:
                continue
        return event_set

    def xid_events(self) -> list[XidEvent]:
        if self._event_set is None or self._closed:
            return []
        xid = self._calls.constant("nvmlEventTypeXidCriticalError")
        events: list[XidEvent] = []
        for _ in range(MAX_EVENTS_PER_POLL):
            try:
                data = self._calls.call("nvmlEventSetWait", self._event_set, 0, absent=("Timeout",))
            except Absent:
                break
            if int(data.eventType) & xid:
                targets = [self._index_of(data.device)] if data.device else range(len(self._handles))
                events.extend(
                    XidEvent(gpu_index=t, xid=int(data.eventData)) for t in targets if t is not None
                )
        return events

    def _index_of(self, device: Any) -> int | None:
        """The index of an event's device: by handle (works on a GPU that fell off the bus), else NVML."""
        address = _address(device)
        for index, handle in enumerate(self._handles):
            if address is not None and _address(handle) == address:
                return index
        try:
            return int(
                self._calls.call("nvmlDeviceGetIndex", device, absent=("GpuIsLost", "InvalidArgument"))
            )
        except Absent:
            return None

    def close(self) -> None:
        """Free the event set and shut NVML down; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        event_set = getattr(self, "_event_set", None)
        if event_set is not None:
            with contextlib.suppress(BackendError):
                self._calls.call("nvmlEventSetFree", event_set)
        with contextlib.suppress(BackendError):
            self._calls.call("nvmlShutdown")


def _clique_of(nvml: Any, info: Any) -> str | None:
    if int(info.state) != int(nvml.NVML_GPU_FABRIC_STATE_COMPLETED) or int(info.status) != int(
        nvml.NVML_SUCCESS
    ):
        return None
    raw = bytes(info.clusterUuid)
    if not any(raw):
        return None
    return f"{uuid.UUID(bytes=raw)}.{int(info.cliqueId)}"


def _bus_key(bus_id: str) -> object:
    """A PCI address in any of NVML's spellings (``00000000:18:00.0``, ``0000:18:00.0``) as one key."""
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return bus_id.strip().lower()


def _address(handle: Any) -> int | None:
    try:
        value = ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return None
    return int(value) if value is not None else None
