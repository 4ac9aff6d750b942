"""A fake ``pynvml`` (nvidia-ml-py 13.x) built from a hardware profile and a node name.

The NVML backend's own code runs against it in the tests: the same function
names and signatures, the real pynvml ctypes structures as results, the real
pynvml exceptions as errors, and pynvml's own constants. It gives each GPU
the UUID and PCI bus id the simulated backend gives it, so both backends must
discover the same node.

How it answers, as hardware does:

- NVLinks: on a switch board every GPU has as many links as its product
  (H100: 18), each ending at an NVSwitch; with point-to-point links each link
  is one slot ending at the peer GPU's PCI address, the other slots up to the
  product's link count are inactive, slots past it are InvalidArgument, and a
  GPU without NVLink (T4, L40S) answers NotSupported.
- NUMA: NotSupported where the profile gives none.
- Fabric info: COMPLETED with the profile's clique; NOT_SUPPORTED state on
  other NVSwitch boards; NotSupported elsewhere.
- XID events: :meth:`FakeNvml.queue_xid` puts an event into every event set
  registered for that GPU (like NVML, an event reaches only the sets
  registered when it happens); ``nvmlEventSetWait`` raises Timeout when none
  is left.
- Faults: :meth:`~tests.agent.fake_nvml_base.FakeBase.fail_next`.
"""

from __future__ import annotations

import uuid
from typing import Any

import pynvml as real

from optsched.agent.profile import HardwareProfile
from optsched.agent.simulated import SIMULATED_DRIVER_VERSION, simulated_bus_id, simulated_uuid
from tests.agent.fake_nvml_base import address_of, error, make_handle, nvml_function, target
from tests.agent.fake_pynvml_mig import FakeMig, MigGpu, mig_family

E = real
NVML_NAMES = {
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H200": "NVIDIA H200",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "Tesla-V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
    "NVIDIA-L40S": "NVIDIA L40S",
    "Tesla-T4": "Tesla T4",
    "NVIDIA-GB200": "NVIDIA GB200",
}
LINKS_PER_GPU = {"H100": 18, "H200": 18, "GB200": 18, "A100": 12, "V100": 6}
SWITCH_BUS_ID = "00000000:C0:00.0"
_DEVICE_BASE = 0x10000
_EVENT_SET_BASE = 0x400000


def _pci(bus_id: str) -> Any:
    domain, bus, rest = bus_id.split(":")
    device, _function = rest.split(".")
    info = E.nvmlPciInfo_t()
    info.busId = bus_id.encode()
    info.busIdLegacy = f"{int(domain, 16):04X}:{bus}:{rest}".encode()
    info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(device, 16)
    info.pciDeviceId = 0x10DE
    return info


class FakeNvml(FakeMig):
    """A stand-in for the ``pynvml`` module: pass it as ``NvmlBackend(nvml=...)``."""

    def __init__(self, profile: HardwareProfile, node: str, *, mig_enabled: bool = False) -> None:
        super().__init__()
        self.profile, self.node, self.memory_mib = profile, node, profile.memory_mib
        family = mig_family(profile.product)
        self.mig_gpus = [
            MigGpu(i, profile.mig_capable, family, enabled=mig_enabled and profile.mig_capable)
            for i in range(profile.count)
        ]
        self.fabric_state = E.NVML_GPU_FABRIC_STATE_COMPLETED
        self.event_sets: dict[int, dict[int, int]] = {}
        """event set address -> {GPU index: registered event types}"""
        self.pending: dict[int, list[tuple[int, int]]] = {}
        self._slots = [self._link_slots(i) for i in range(profile.count)]

    def _link_slots(self, index: int) -> list[int | None]:
        """Per NVLink slot: -1 for a switch, a peer GPU index, or None for an inactive link."""
        capacity = next((n for key, n in LINKS_PER_GPU.items() if key in self.profile.product), 0)
        if self.profile.switch:
            return [-1] * (capacity or 18)
        slots: list[int | None] = []
        for link in self.profile.links:
            if index in (link.a, link.b):
                slots.extend([link.b if index == link.a else link.a] * link.count)
        return slots + [None] * (capacity - len(slots))

    def device_index(self, handle: Any) -> int:
        index = (address_of(handle) or 0) - _DEVICE_BASE
        if index % 0x10 or not 0 <= index // 0x10 < self.profile.count:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        return index // 0x10

    def _handle(self, index: int) -> Any:
        return make_handle(E.c_nvmlDevice_t, _DEVICE_BASE + index * 0x10)

    def queue_xid(self, index: int, xid: int) -> None:
        """An XID critical error on GPU ``index``, delivered to every event set registered for it."""
        for address, registered in self.event_sets.items():
            if registered.get(index, 0) & E.nvmlEventTypeXidCriticalError:
                self.pending[address].append((index, xid))

    @nvml_function
    def nvmlInit(self) -> None:
        self.initialised = True

    @nvml_function
    def nvmlShutdown(self) -> None:
        self.initialised = False

    @nvml_function
    def nvmlSystemGetDriverVersion(self) -> str:
        return SIMULATED_DRIVER_VERSION

    @nvml_function
    def nvmlDeviceGetCount(self) -> int:
        return self.profile.count

    @nvml_function
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if not 0 <= index < self.profile.count:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle(index)

    @nvml_function
    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        return self.device_index(handle)

    @nvml_function
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self.device_index(handle)

    @nvml_function
    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        mig = self.mig_device(handle)
        if mig is not None:
            return self.mig_uuid(mig[0].index, mig[1], mig[2])
        return simulated_uuid(self.node, self.device_index(handle))

    @nvml_function
    def nvmlDeviceGetName(self, handle: Any) -> str:
        self.device_index(handle)
        return NVML_NAMES.get(self.profile.product, self.profile.product.replace("-", " "))

    @nvml_function
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        return _pci(simulated_bus_id(self.device_index(handle)))

    @nvml_function
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        self.device_index(handle)
        memory = E.c_nvmlMemory_v2_t() if version else E.c_nvmlMemory_t()
        memory.total = memory.free = self.profile.memory_mib * 2**20
        memory.used = 0
        return memory

    @nvml_function
    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        index = self.device_index(handle)
        if self.profile.numa is None:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        return self.profile.numa[index]

    def _slot(self, handle: Any, link: int) -> int | None:
        slots = self._slots[self.device_index(handle)]
        if not slots:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < min(len(slots), E.NVML_NVLINK_MAX_LINKS):
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        return slots[link]

    @nvml_function
    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        return E.NVML_FEATURE_DISABLED if self._slot(device, link) is None else E.NVML_FEATURE_ENABLED

    @nvml_function
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        end = self._slot(handle, link)
        if end is None:
            return E.NVML_NVLINK_DEVICE_TYPE_UNKNOWN
        return E.NVML_NVLINK_DEVICE_TYPE_SWITCH if end < 0 else E.NVML_NVLINK_DEVICE_TYPE_GPU

    @nvml_function
    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        end = self._slot(device, link)
        if end is None:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        return _pci(SWITCH_BUS_ID if end < 0 else simulated_bus_id(end))

    def _fabric(self, handle: Any, info: Any) -> None:
        self.device_index(handle)
        clique = self.profile.clique
        if clique is None and not self.profile.switch:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        info.status = E.NVML_SUCCESS
        info.state = E.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
        if clique is not None:
            cluster, clique_id = clique.split(".")
            info.clusterUuid[:] = list(uuid.UUID(cluster).bytes)
            info.cliqueId, info.state = int(clique_id), self.fabric_state

    @nvml_function
    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        info = target(gpuFabricInfo)
        if info.version not in (E.nvmlGpuFabricInfo_v2, E.nvmlGpuFabricInfo_v3):
            raise error(E.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        self._fabric(device, info)
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlDeviceGetGpuFabricInfo(self, device: Any, gpuFabricInfo: Any) -> int:
        self._fabric(device, target(gpuFabricInfo))
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        mig = self.mig_device(handle)
        if mig is None:
            self.device_index(handle)
            return []
        state, instance_id, _compute = mig
        if instance_id not in state.busy:
            return []
        process = E.c_nvmlProcessInfo_v2_t(pid=4242, usedGpuMemory=2**30, gpuInstanceId=instance_id)
        return [real.nvmlStructToFriendlyObject(process)]

    @nvml_function
    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        mig = self.mig_device(device)
        if mig is None:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        return mig[1]

    @nvml_function
    def nvmlEventSetCreate(self) -> Any:
        address = _EVENT_SET_BASE + len(self.event_sets) + 1
        self.event_sets[address] = {}
        self.pending[address] = []
        return make_handle(E.c_nvmlEventSet_t, address)

    @nvml_function
    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        self.device_index(handle)
        return E.nvmlEventTypeXidCriticalError | E.nvmlEventTypeDoubleBitEccError

    @nvml_function
    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        index = self.device_index(handle)
        registered = self.event_sets.get(address_of(eventSet) or 0)
        if registered is None:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        registered[index] = registered.get(index, 0) | eventTypes

    @nvml_function
    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        queue = self.pending.get(address_of(eventSet) or 0)
        if queue is None:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        if not queue:
            raise error(E.NVML_ERROR_TIMEOUT)
        index, xid = queue.pop(0)
        data = E.c_nvmlEventData_t()
        data.device = self._handle(index)
        data.eventType, data.eventData = E.nvmlEventTypeXidCriticalError, xid
        data.gpuInstanceId = data.computeInstanceId = 0xFFFFFFFF
        return data

    @nvml_function
    def nvmlEventSetFree(self, eventSet: Any) -> None:
        address = address_of(eventSet) or 0
        if self.event_sets.pop(address, None) is None:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        del self.pending[address]
