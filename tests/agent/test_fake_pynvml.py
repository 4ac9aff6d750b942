"""The fake pynvml stays a faithful stand-in: pynvml's signatures, structures, errors and constants."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from optsched.agent.profile import resolve_profiles
from tests.agent.fake_pynvml import FakeNvml


def fake(name: str = "dgx-h100") -> FakeNvml:
    return FakeNvml(resolve_profiles(name)[0], "node-f")


def nvml_functions() -> list[str]:
    return sorted(name for name in dir(FakeNvml) if name.startswith("nvml"))


@pytest.mark.parametrize("name", nvml_functions())
def test_every_faked_function_has_pynvmls_name_and_parameters(name: str) -> None:
    real = inspect.signature(getattr(pynvml, name))
    faked = inspect.signature(getattr(fake(), name))
    assert list(faked.parameters) == list(real.parameters)
    assert [p.default for p in faked.parameters.values()] == [p.default for p in real.parameters.values()]


def test_results_are_pynvmls_own_structures_and_errors_its_own_classes() -> None:
    nvml = fake("gb200-tray")
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(handle, pynvml.c_nvmlDevice_t)
    assert isinstance(nvml.nvmlDeviceGetPciInfo(handle), pynvml.nvmlPciInfo_t)
    assert isinstance(nvml.nvmlDeviceGetMemoryInfo(handle), pynvml.c_nvmlMemory_t)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetNumaNodeId(handle)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(4)
    assert nvml.NVML_NVLINK_MAX_LINKS == pynvml.NVML_NVLINK_MAX_LINKS
    assert nvml.NVMLError is pynvml.NVMLError


def test_calls_before_nvml_init_fail_as_in_pynvml() -> None:
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake().nvmlDeviceGetCount()


def test_functions_the_fake_lacks_are_not_borrowed_from_the_real_library() -> None:
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetPowerUsage"):
        _ = fake().nvmlDeviceGetPowerUsage


def test_link_slots_behave_like_hardware() -> None:
    nvml = fake("dgx1-v100")
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    states = [nvml.nvmlDeviceGetNvLinkState(handle, link) for link in range(6)]
    assert states == [pynvml.NVML_FEATURE_ENABLED] * 6
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetNvLinkState(handle, 6)
    bridged = fake("a100-pcie-bridged")
    bridged.nvmlInit()
    assert bridged.nvmlDeviceGetNvLinkState(bridged.nvmlDeviceGetHandleByIndex(0), 11) == 1
    l40s = fake("l40s-pcie")
    l40s.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        l40s.nvmlDeviceGetNvLinkState(l40s.nvmlDeviceGetHandleByIndex(0), 0)


def test_an_empty_event_set_times_out() -> None:
    nvml = fake()
    nvml.nvmlInit()
    event_set = nvml.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(event_set, 0)


def test_fail_next_fails_one_call_only() -> None:
    nvml = fake()
    nvml.nvmlInit()
    nvml.fail_next("nvmlDeviceGetCount", pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN))
    with pytest.raises(pynvml.NVMLError_Unknown):
        nvml.nvmlDeviceGetCount()
    assert nvml.nvmlDeviceGetCount() == 8
