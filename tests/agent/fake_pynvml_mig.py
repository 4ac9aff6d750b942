"""The MIG part of the fake pynvml: GPU and compute instances on the 8-slice memory axis.

It emulates hardware, so it has its own small geometry table (NVIDIA's MIG
user guide: allowed starts and slices per profile, the same on A100, H100 and
H200) and refuses what a GPU refuses: a start the profile does not allow or a
size that does not match (InvalidArgument), an overlap, too many instances of
a profile or more than 7 compute slices (InsufficientResources), destroying a
GPU instance that still holds compute instances (InUse). The agent's own
profile table and layout rules live in ``optsched.mig``; this one only makes
the NVML calls answer like a GPU.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

from tests.agent.fake_nvml_base import FakeBase, address_of, error, make_handle, nvml_function, target

E = real

# GPU instance profile enum -> (profile id, compute slices, memory slices, max instances, allowed starts)
GEOMETRY: dict[int, tuple[int, int, int, int, tuple[int, ...]]] = {
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: (20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: (15, 1, 2, 4, (0, 2, 4, 6)),
    E.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (14, 2, 2, 3, (0, 2, 4)),
    E.NVML_GPU_INSTANCE_PROFILE_3_SLICE: (9, 3, 4, 2, (0, 4)),
    E.NVML_GPU_INSTANCE_PROFILE_4_SLICE: (5, 4, 4, 1, (0,)),
    E.NVML_GPU_INSTANCE_PROFILE_7_SLICE: (0, 7, 8, 1, (0,)),
}
_ORDER = (
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE,
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
    E.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
    E.NVML_GPU_INSTANCE_PROFILE_2_SLICE,
    E.NVML_GPU_INSTANCE_PROFILE_3_SLICE,
    E.NVML_GPU_INSTANCE_PROFILE_4_SLICE,
    E.NVML_GPU_INSTANCE_PROFILE_7_SLICE,
)
# Profile names per memory size, in _ORDER (MIG user guide tables 6-8).
NAMES = {
    "40gb": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "80gb": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "141gb": ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
}
# Compute instance profile enum -> compute slices.
CI_SLICES = {
    E.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: 1,
    E.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: 2,
    E.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: 3,
    E.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: 4,
    E.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: 7,
}
MAX_MIG_DEVICES = 7


def mig_family(product: str) -> str | None:
    """Which name table a product uses, or None for a GPU the fake has no MIG profiles for."""
    if "H200" in product:
        return "141gb"
    if "H100" in product or ("A100" in product and "80GB" in product):
        return "80gb"
    if "A100" in product and "40GB" in product:
        return "40gb"
    return None


@dataclass
class GpuInstance:
    id: int
    enum: int
    start: int
    size: int
    computes: dict[int, int] = field(default_factory=dict)
    """compute instance id -> compute instance profile enum"""


@dataclass
class MigGpu:
    index: int
    capable: bool
    family: str | None
    enabled: bool = False
    instances: dict[int, GpuInstance] = field(default_factory=dict)
    busy: set[int] = field(default_factory=set)
    """GPU instance ids with a process running"""


class FakeMig(FakeBase):
    """NVML's MIG functions over ``self.mig_gpus`` (one MigGpu per index)."""

    node: str
    mig_gpus: list[MigGpu]
    memory_mib: int

    def device_index(self, handle: Any) -> int:
        raise NotImplementedError

    def run_process(self, gpu: int, start: int) -> None:
        """Mark the GPU instance at ``start`` as running a process (its MIG device is in use)."""
        for instance in self.mig_gpus[gpu].instances.values():
            if instance.start == start:
                self.mig_gpus[gpu].busy.add(instance.id)
                return
        raise KeyError(start)

    def _gpu(self, handle: Any) -> MigGpu:
        state = self.mig_gpus[self.device_index(handle)]
        if not state.capable:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        return state

    def _instance(self, handle: Any) -> tuple[MigGpu, GpuInstance]:
        address = address_of(handle) or 0
        gpu, instance_id = divmod(address - 0x100000, 0x100)
        if address < 0x100000 or not 0 <= gpu < len(self.mig_gpus):
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        state = self.mig_gpus[gpu]
        if instance_id not in state.instances:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        return state, state.instances[instance_id]

    def _gi_handle(self, gpu: int, instance_id: int) -> Any:
        return make_handle(E.c_nvmlGpuInstance_t, 0x100000 + gpu * 0x100 + instance_id)

    def _enum_of(self, state: MigGpu, profile_id: int) -> int:
        for enum, geometry in GEOMETRY.items():
            if geometry[0] == profile_id and state.family is not None:
                return enum
        raise error(E.NVML_ERROR_INVALID_ARGUMENT)

    @nvml_function
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        mode = E.NVML_DEVICE_MIG_ENABLE if self._gpu(device).enabled else E.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    @nvml_function
    def nvmlDeviceSetMigMode(self, device: Any, mode: int) -> int:
        state = self._gpu(device)
        if mode == E.NVML_DEVICE_MIG_DISABLE and state.instances:
            raise error(E.NVML_ERROR_IN_USE)
        state.enabled = mode == E.NVML_DEVICE_MIG_ENABLE
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        state = self._gpu(device)
        if not 0 <= profile < E.NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        if not state.enabled or state.family is None or profile not in GEOMETRY:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        profile_id, compute, memory, most, _starts = GEOMETRY[profile]
        info = E.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2 else E.c_nvmlGpuInstanceProfileInfo_t()
        info.id, info.sliceCount, info.instanceCount = profile_id, compute, most
        info.multiprocessorCount = compute * 16
        info.memorySizeMB = self.memory_mib * memory // 8
        if version == 2:
            info.name = f"MIG {NAMES[state.family][_ORDER.index(profile)]}".encode()
        return info

    @nvml_function
    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, device: Any, profileId: int, placementsRef: Any, countRef: Any
    ) -> int:
        state = self._gpu(device)
        _id, _compute, memory, _most, starts = GEOMETRY[self._enum_of(state, profileId)]
        count = target(countRef)
        count.value = len(starts)
        if placementsRef is not None:
            for slot, start in enumerate(starts):
                placementsRef[slot] = E.c_nvmlGpuInstancePlacement_t(start, memory)
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device: Any, profileId: int, placement: Any) -> Any:
        state = self._gpu(device)
        if not state.enabled:
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        enum = self._enum_of(state, profileId)
        _id, compute, memory, most, starts = GEOMETRY[enum]
        wanted = target(placement)
        if wanted.start not in starts or wanted.size != memory:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        used = 0
        for other in state.instances.values():
            used |= ((1 << other.size) - 1) << other.start
        same = sum(1 for other in state.instances.values() if other.enum == enum)
        computes = sum(GEOMETRY[other.enum][1] for other in state.instances.values())
        if used & (((1 << memory) - 1) << wanted.start) or same >= most or computes + compute > 7:
            raise error(E.NVML_ERROR_INSUFFICIENT_RESOURCES)
        instance_id = 1 + max(state.instances, default=0)
        state.instances[instance_id] = GpuInstance(instance_id, enum, int(wanted.start), memory)
        return self._gi_handle(state.index, instance_id)

    @nvml_function
    def nvmlDeviceGetGpuInstances(
        self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any
    ) -> int:
        state = self._gpu(device)
        enum = self._enum_of(state, profileId)
        matching = sorted(i for i, instance in state.instances.items() if instance.enum == enum)
        for slot, instance_id in enumerate(matching):
            gpuInstancesRef[slot] = self._gi_handle(state.index, instance_id)
        target(countRef).value = len(matching)
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        state, instance = self._instance(gpuInstance)
        info = E.c_nvmlGpuInstanceInfo_t()
        info.device = make_handle(E.c_nvmlDevice_t, 0x10000 + state.index * 0x10)
        info.id, info.profileId = instance.id, GEOMETRY[instance.enum][0]
        info.placement = E.c_nvmlGpuInstancePlacement_t(instance.start, instance.size)
        return info

    @nvml_function
    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:
        state, instance = self._instance(gpuInstance)
        if instance.computes:
            raise error(E.NVML_ERROR_IN_USE)
        del state.instances[instance.id]
        state.busy.discard(instance.id)
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, device: Any, profile: int, engProfile: int, version: int = 2
    ) -> Any:
        _state, instance = self._instance(device)
        compute = GEOMETRY[instance.enum][1]
        slices = CI_SLICES.get(profile)
        if slices is None or slices > compute or (compute == 4 and slices == 3):
            raise error(E.NVML_ERROR_NOT_SUPPORTED)
        info = (
            E.c_nvmlComputeInstanceProfileInfo_v2_t()
            if version == 2
            else E.c_nvmlComputeInstanceProfileInfo_t()
        )
        info.id, info.sliceCount, info.instanceCount = profile, slices, compute // slices
        info.multiprocessorCount = slices * 16
        return info

    @nvml_function
    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:
        state, instance = self._instance(gpuInstance)
        slices = CI_SLICES.get(profileId)
        compute = GEOMETRY[instance.enum][1]
        if slices is None or slices > compute:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        if sum(CI_SLICES[c] for c in instance.computes.values()) + slices > compute:
            raise error(E.NVML_ERROR_INSUFFICIENT_RESOURCES)
        compute_id = len(instance.computes)
        instance.computes[compute_id] = profileId
        return self._ci_handle(state.index, instance.id, compute_id)

    def _ci_handle(self, gpu: int, instance_id: int, compute_id: int) -> Any:
        return make_handle(
            E.c_nvmlComputeInstance_t, 0x200000 + gpu * 0x1000 + instance_id * 0x10 + compute_id
        )

    @nvml_function
    def nvmlGpuInstanceGetComputeInstances(
        self, gpuInstance: Any, profileId: int, computeInstancesRef: Any, countRef: Any
    ) -> int:
        state, instance = self._instance(gpuInstance)
        matching = sorted(c for c, p in instance.computes.items() if p == profileId)
        for slot, compute_id in enumerate(matching):
            computeInstancesRef[slot] = self._ci_handle(state.index, instance.id, compute_id)
        target(countRef).value = len(matching)
        return E.NVML_SUCCESS

    @nvml_function
    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:
        gpu, rest = divmod((address_of(computeInstance) or 0) - 0x200000, 0x1000)
        instance_id, compute_id = divmod(rest, 0x10)
        if not 0 <= gpu < len(self.mig_gpus):
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        instance = self.mig_gpus[gpu].instances.get(instance_id)
        if instance is None or compute_id not in instance.computes:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        del instance.computes[compute_id]
        return E.NVML_SUCCESS

    def _mig_devices(self, state: MigGpu) -> list[tuple[int, int]]:
        """(GPU instance id, compute instance id) per MIG device, in NVML's index order."""
        return [(gi, ci) for gi in sorted(state.instances) for ci in sorted(state.instances[gi].computes)]

    @nvml_function
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        self._gpu(device)
        return MAX_MIG_DEVICES

    @nvml_function
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        state = self._gpu(device)
        if not 0 <= index < MAX_MIG_DEVICES:
            raise error(E.NVML_ERROR_INVALID_ARGUMENT)
        devices = self._mig_devices(state)
        if index >= len(devices):
            raise error(E.NVML_ERROR_NOT_FOUND)
        instance_id, compute_id = devices[index]
        return make_handle(
            E.c_nvmlDevice_t, 0x300000 + state.index * 0x1000 + instance_id * 0x10 + compute_id
        )

    def mig_device(self, handle: Any) -> tuple[MigGpu, int, int] | None:
        """(GPU, instance id, compute id) for a MIG device handle, None for any other handle."""
        address = address_of(handle) or 0
        if not 0x300000 <= address < 0x400000:
            return None
        gpu, rest = divmod(address - 0x300000, 0x1000)
        instance_id, compute_id = divmod(rest, 0x10)
        return self.mig_gpus[gpu], instance_id, compute_id

    def mig_uuid(self, gpu: int, instance_id: int, compute_id: int) -> str:
        return f"MIG-{uuid.uuid5(uuid.NAMESPACE_OID, f'{self.node}/{gpu}/{instance_id}/{compute_id}')}"
