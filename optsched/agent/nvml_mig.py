"""MIG GPU instances through NVML: read them, create one at an explicit placement, destroy one.

A GPU instance is created with ``nvmlDeviceCreateGpuInstanceWithPlacement``
at the start slice the layout asks for (never where the driver would choose),
then filled with one compute instance. Profiles are found by the name NVML
gives them (``MIG 1g.10gb``), so nothing here hard-codes a model's profile
IDs; which layouts are valid is decided before this module is called (the
MIG tables in ``optsched.mig``).

One instance is created or destroyed at a time, whatever else the GPU holds:
once a GPU is in MIG mode its GPU and compute instances are configured
dynamically, while the other instances keep running work; only the instance
being destroyed must be idle, else NVML refuses with ``In Use`` (NVIDIA
Multi-Instance GPU User Guide, "Destroying GPU Instances",
https://docs.nvidia.com/datacenter/tesla/mig-user-guide/). An instance is
reported ``in_use`` while a process runs on its MIG device.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

from optsched.agent.backend import BackendError
from optsched.agent.devices import MigInstance
from optsched.agent.nvml_calls import NOT_SUPPORTED, Absent, NvmlCalls, text

_NO_PROFILE = ("NotSupported", "InvalidArgument")


class NvmlMig:
    """``MigControl`` over NVML for the GPUs behind ``handles`` (index order)."""

    def __init__(self, calls: NvmlCalls, handles: list[Any]) -> None:
        self._calls = calls
        self._handles = handles

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        devices = self._mig_devices(gpu)
        found = []
        for profile in self._profiles(gpu):
            for instance in self._gpu_instances(gpu, profile):
                info = self._calls.call("nvmlGpuInstanceGetInfo", instance, gpu=gpu)
                mig_uuid, in_use = devices.get(int(info.id), ("", False))
                found.append(
                    MigInstance(
                        profile=_profile_name(profile),
                        start=int(info.placement.start),
                        size=int(info.placement.size),
                        uuid=mig_uuid,
                        in_use=in_use,
                    )
                )
        return tuple(sorted(found, key=lambda instance: instance.start))

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        handle = self._handle(gpu)
        current, _pending = self._calls.call("nvmlDeviceGetMigMode", handle, gpu=gpu)
        if int(current) != self._calls.constant("NVML_DEVICE_MIG_ENABLE"):
            raise BackendError(
                f"cannot create {profile} at slice {start} on GPU {gpu}: MIG mode is not enabled"
            )
        info = self._profile_named(gpu, profile)
        placement = self._placement(gpu, info, start)
        instance = self._calls.call(
            "nvmlDeviceCreateGpuInstanceWithPlacement", handle, info.id, ctypes.byref(placement), gpu=gpu
        )
        try:
            self._fill(gpu, instance, info)
        except BackendError:
            with contextlib.suppress(BackendError):
                self._calls.call("nvmlGpuInstanceDestroy", instance, gpu=gpu)
            raise
        for created in self.instances(gpu):
            if created.start == start:
                return created
        return MigInstance(profile=profile, start=start, size=int(placement.size))

    def destroy(self, gpu: int, start: int) -> None:
        for profile in self._profiles(gpu):
            for instance in self._gpu_instances(gpu, profile):
                if (
                    int(self._calls.call("nvmlGpuInstanceGetInfo", instance, gpu=gpu).placement.start)
                    != start
                ):
                    continue
                for compute in self._compute_instances(gpu, instance):
                    self._calls.call("nvmlComputeInstanceDestroy", compute, gpu=gpu)
                self._calls.call("nvmlGpuInstanceDestroy", instance, gpu=gpu)
                return
        raise BackendError(f"no MIG GPU instance starts at slice {start} on GPU {gpu}")

    def _handle(self, gpu: int) -> Any:
        if not 0 <= gpu < len(self._handles):
            raise BackendError(f"GPU {gpu} does not exist: the node has {len(self._handles)} GPUs")
        return self._handles[gpu]

    def _profiles(self, gpu: int) -> list[Any]:
        """The GPU instance profiles the GPU offers now (none while MIG mode is off)."""
        handle, seen, out = self._handle(gpu), set(), []
        for enum in range(self._calls.constant("NVML_GPU_INSTANCE_PROFILE_COUNT")):
            try:
                info = self._calls.call(
                    "nvmlDeviceGetGpuInstanceProfileInfo", handle, enum, gpu=gpu, absent=_NO_PROFILE
                )
            except Absent:
                continue
            if int(info.id) not in seen:
                seen.add(int(info.id))
                out.append(info)
        return out

    def _profile_named(self, gpu: int, name: str) -> Any:
        profiles = self._profiles(gpu)
        for info in profiles:
            if _profile_name(info) == name:
                return info
        offered = ", ".join(_profile_name(info) for info in profiles) or "none"
        raise BackendError(f"GPU {gpu} has no MIG profile {name!r} (it offers: {offered})")

    def _placement(self, gpu: int, info: Any, start: int) -> Any:
        """The possible placement of the profile that begins at ``start``."""
        nvml, handle = self._calls.nvml, self._handle(gpu)
        count = ctypes.c_uint(0)
        name = "nvmlDeviceGetGpuInstancePossiblePlacements"
        self._calls.call(name, handle, info.id, None, ctypes.byref(count), gpu=gpu)
        placements = (nvml.c_nvmlGpuInstancePlacement_t * max(count.value, 1))()
        self._calls.call(name, handle, info.id, placements, ctypes.byref(count), gpu=gpu)
        for placement in placements[: count.value]:
            if int(placement.start) == start:
                return placement
        starts = ", ".join(str(p.start) for p in placements[: count.value]) or "none"
        raise BackendError(
            f"{_profile_name(info)} cannot start at slice {start} on GPU {gpu} (allowed starts: {starts})"
        )

    def _gpu_instances(self, gpu: int, info: Any) -> list[Any]:
        size = int(info.instanceCount)
        if size <= 0:
            return []
        instances = (self._calls.nvml.c_nvmlGpuInstance_t * size)()
        count = ctypes.c_uint(0)
        self._calls.call(
            "nvmlDeviceGetGpuInstances", self._handle(gpu), info.id, instances, ctypes.byref(count), gpu=gpu
        )
        return [instances[i] for i in range(min(count.value, size))]

    def _compute_profiles(self, gpu: int, instance: Any) -> list[Any]:
        nvml, out = self._calls.nvml, []
        for enum in range(self._calls.constant("NVML_COMPUTE_INSTANCE_PROFILE_COUNT")):
            try:
                out.append(
                    self._calls.call(
                        "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                        instance,
                        enum,
                        nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                        gpu=gpu,
                        absent=_NO_PROFILE,
                    )
                )
            except Absent:
                continue
        return out

    def _fill(self, gpu: int, instance: Any, info: Any) -> None:
        """One compute instance using all of the GPU instance's compute slices."""
        fitting = [
            p for p in self._compute_profiles(gpu, instance) if int(p.sliceCount) <= int(info.sliceCount)
        ]
        if not fitting:
            raise BackendError(f"GPU {gpu}: no compute instance profile fits {_profile_name(info)}")
        best = max(fitting, key=lambda p: int(p.sliceCount))
        self._calls.call("nvmlGpuInstanceCreateComputeInstance", instance, best.id, gpu=gpu)

    def _compute_instances(self, gpu: int, instance: Any) -> list[Any]:
        out: list[Any] = []
        for profile in self._compute_profiles(gpu, instance):
            size = int(profile.instanceCount)
            if size <= 0:
                continue
            computes = (self._calls.nvml.c_nvmlComputeInstance_t * size)()
            count = ctypes.c_uint(0)
            self._calls.call(
                "nvmlGpuInstanceGetComputeInstances",
                instance,
                profile.id,
                computes,
                ctypes.byref(count),
                gpu=gpu,
            )
            out.extend(computes[i] for i in range(min(count.value, size)))
        return out

    def _mig_devices(self, gpu: int) -> dict[int, tuple[str, bool]]:
        """Per GPU instance id: the UUID of its MIG device and whether a process runs on it."""
        handle, out = self._handle(gpu), {}
        try:
            slots = int(
                self._calls.call("nvmlDeviceGetMaxMigDeviceCount", handle, gpu=gpu, absent=NOT_SUPPORTED)
            )
        except Absent:
            return {}
        for slot in range(slots):
            try:
                device = self._calls.call(
                    "nvmlDeviceGetMigDeviceHandleByIndex",
                    handle,
                    slot,
                    gpu=gpu,
                    absent=("NotFound", "InvalidArgument"),
                )
            except Absent:
                continue
            instance_id = int(self._calls.call("nvmlDeviceGetGpuInstanceId", device, gpu=gpu))
            if instance_id not in out:
                out[instance_id] = (
                    text(self._calls.call("nvmlDeviceGetUUID", device, gpu=gpu)),
                    self._busy(gpu, device),
                )
        return out

    def _busy(self, gpu: int, device: Any) -> bool:
        try:
            processes = self._calls.call(
                "nvmlDeviceGetComputeRunningProcesses",
                device,
                gpu=gpu,
                absent=("NotSupported", "NoPermission"),
            )
        except Absent:
            return False
        return bool(processes)


def _profile_name(info: Any) -> str:
    """``1g.10gb`` from NVML's ``MIG 1g.10gb``."""
    return text(info.name).strip().removeprefix("MIG ").strip()
