"""The NVML backend's own code against a fake pynvml fed by the same hardware profiles as the simulator."""

from __future__ import annotations

import ctypes.util
import sys

import pynvml
import pytest

from optsched.agent.backend import BackendError
from optsched.agent.devices import NvLink, XidEvent
from optsched.agent.nvml import NvmlBackend
from optsched.agent.profile import HardwareProfile, resolve_profiles, shipped_names
from optsched.agent.simulated import SimulatedBackend
from tests.agent.fake_pynvml import FakeNvml

NODE = "gpu-node-7"
EXTRA = [
    HardwareProfile(name="odd", product="NVIDIA-A10", memory_mib=22731, count=3, links=(NvLink(0, 2, 2),)),
    HardwareProfile(name="solo", product="NVIDIA-H100-PCIe", memory_mib=81559, count=1, mig_capable=True),
]


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


def profile(name: str) -> HardwareProfile:
    return resolve_profiles(name)[0]


@pytest.mark.parametrize("name", shipped_names())
def test_nvml_discovery_through_the_fake_equals_the_simulated_backend(name: str) -> None:
    hardware = profile(name)
    backend = NvmlBackend(FakeNvml(hardware, NODE))
    assert backend.discover() == SimulatedBackend(hardware, NODE).discover()


@pytest.mark.parametrize("hardware", EXTRA, ids=[p.name for p in EXTRA])
def test_nvml_and_simulated_agree_on_other_shapes_too(hardware: HardwareProfile) -> None:
    assert NvmlBackend(FakeNvml(hardware, NODE)).discover() == SimulatedBackend(hardware, NODE).discover()


def test_switch_boards_are_found_through_switch_links_and_bridges_through_peer_pci_addresses() -> None:
    switch = FakeNvml(profile("dgx-h100"), NODE)
    assert NvmlBackend(switch).discover().nvswitch == frozenset(range(8))
    assert switch.calls["nvmlDeviceGetNvLinkRemotePciInfo"] == 0
    bridged = FakeNvml(profile("a100-pcie-bridged"), NODE)
    found = NvmlBackend(bridged).discover()
    assert (
        found.nvlinks == tuple(NvLink(a, a + 1, 12) for a in (0, 2, 4, 6)) and found.nvswitch == frozenset()
    )
    assert bridged.calls["nvmlDeviceGetNvLinkRemotePciInfo"] == 8 * 12


def test_a_gpu_without_nvlink_has_no_links_and_no_switch() -> None:
    found = NvmlBackend(FakeNvml(profile("t4"), NODE)).discover()
    assert found.nvlinks == () and found.nvswitch == frozenset()


def test_a_clique_is_read_only_once_the_fabric_registration_completed() -> None:
    fake = FakeNvml(profile("gb200-tray"), NODE)
    backend = NvmlBackend(fake)
    assert backend.discover().gpus[0].clique == "a1b2c3d4-0000-4000-8000-000000000001.1"
    fake.fabric_state = pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS
    assert {gpu.clique for gpu in backend.discover().gpus} == {None}


def test_an_older_driver_without_the_versioned_fabric_call_falls_back_to_the_plain_one() -> None:
    fake = FakeNvml(profile("gb200-tray"), NODE)
    backend = NvmlBackend(fake)
    fake.fail_next("nvmlDeviceGetGpuFabricInfoV", nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))
    assert backend.discover().gpus[0].clique == "a1b2c3d4-0000-4000-8000-000000000001.1"
    assert fake.calls["nvmlDeviceGetGpuFabricInfo"] == 1


def test_a_fabric_that_is_not_supported_means_no_clique() -> None:
    fake = FakeNvml(profile("gb200-tray"), NODE)
    fake.fail_next("nvmlDeviceGetGpuFabricInfoV", nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert NvmlBackend(fake).discover().gpus[0].clique is None


def test_an_nvml_error_becomes_a_backend_error_naming_the_call_and_the_gpu() -> None:
    fake = FakeNvml(profile("dgx-h100"), NODE)
    backend = NvmlBackend(fake)
    fake.fail_next("nvmlDeviceGetUUID", nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST))
    with pytest.raises(
        BackendError, match=r"nvmlDeviceGetUUID failed on GPU 0: GPU is lost \(NVML error 15\)"
    ):
        backend.discover()
    fake.fail_next("nvmlDeviceGetNvLinkState", nvml_error(pynvml.NVML_ERROR_UNKNOWN))
    with pytest.raises(BackendError, match="nvmlDeviceGetNvLinkState failed on GPU 0: Unknown Error"):
        backend.discover()
    assert backend.discover().gpus[0].uuid.startswith("GPU-")


def test_a_failure_while_starting_shuts_nvml_down_again() -> None:
    fake = FakeNvml(profile("t4"), NODE)
    fake.fail_next("nvmlDeviceGetHandleByIndex", nvml_error(pynvml.NVML_ERROR_NO_PERMISSION))
    with pytest.raises(
        BackendError, match="nvmlDeviceGetHandleByIndex failed on GPU 0: Insufficient Permissions"
    ):
        NvmlBackend(fake)
    assert not fake.initialised


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 was not found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission to open the GPU devices"),
        (pynvml.NVML_ERROR_UNKNOWN, "nvmlInit failed: Unknown Error"),
    ],
)
def test_nvml_that_cannot_start_is_a_backend_error_saying_why(code: int, words: str) -> None:
    fake = FakeNvml(profile("t4"), NODE)
    fake.fail_next("nvmlInit", nvml_error(code))
    with pytest.raises(BackendError, match=words):
        NvmlBackend(fake)


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="an NVIDIA driver is installed")
def test_the_real_pynvml_without_a_driver_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match=r"libnvidia-ml\.so\.1 was not found"):
        NvmlBackend()


def test_a_missing_nvidia_ml_py_is_a_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(BackendError, match="needs the nvidia-ml-py package"):
        NvmlBackend()


def test_xid_events_arrive_through_the_event_set_unfiltered_and_once() -> None:
    fake = FakeNvml(profile("dgx-h100"), NODE)
    backend = NvmlBackend(fake)
    assert backend.xid_events() == []
    fake.queue_xid(3, 79)
    fake.queue_xid(5, 13)
    assert backend.xid_events() == [XidEvent(3, 79), XidEvent(5, 13)]
    assert backend.xid_events() == []


def test_a_gpu_that_does_not_support_xid_events_is_skipped() -> None:
    fake = FakeNvml(profile("t4"), NODE)
    fake.fail_next("nvmlDeviceRegisterEvents", nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED))
    backend = NvmlBackend(fake)
    fake.queue_xid(0, 79)
    fake.queue_xid(1, 79)
    assert backend.xid_events() == [XidEvent(1, 79)]


def test_without_event_support_there_are_no_events() -> None:
    fake = FakeNvml(profile("t4"), NODE)
    fake.fail_next("nvmlEventSetCreate", nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED))
    backend = NvmlBackend(fake)
    fake.queue_xid(0, 79)
    assert backend.xid_events() == []


def test_an_event_wait_failure_is_a_backend_error() -> None:
    fake = FakeNvml(profile("t4"), NODE)
    backend = NvmlBackend(fake)
    fake.fail_next("nvmlEventSetWait", nvml_error(pynvml.NVML_ERROR_UNKNOWN))
    with pytest.raises(BackendError, match="nvmlEventSetWait failed"):
        backend.xid_events()


def test_close_frees_the_event_set_and_shuts_nvml_down_once() -> None:
    fake = FakeNvml(profile("t4"), NODE)
    backend = NvmlBackend(fake)
    backend.close()
    backend.close()
    assert (fake.calls["nvmlEventSetFree"], fake.calls["nvmlShutdown"]) == (1, 1)
    assert fake.event_sets == {} and not fake.initialised
    assert backend.xid_events() == []


def test_mig_mode_and_current_instances_are_discovered() -> None:
    fake = FakeNvml(profile("hgx-a100-sxm"), NODE, mig_enabled=True)
    backend = NvmlBackend(fake)
    backend.mig.create(1, "3g.40gb", 4)
    gpus = backend.discover().gpus
    assert all(gpu.mig_capable and gpu.mig_enabled for gpu in gpus)
    assert [(i.profile, i.start, i.size) for i in gpus[1].mig_instances] == [("3g.40gb", 4, 4)]
    assert gpus[1].mig_instances[0].uuid.startswith("MIG-")
    assert gpus[0].mig_instances == ()
