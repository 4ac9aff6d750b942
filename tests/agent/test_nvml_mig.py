"""MIG through NVML against the fake: explicit placements, a compute instance each, refusals, clean-up."""

from __future__ import annotations

import pynvml
import pytest

from optsched.agent.backend import BackendError
from optsched.agent.nvml import NvmlBackend
from optsched.agent.profile import resolve_profiles
from tests.agent.fake_pynvml import FakeNvml

# Per shipped MIG profile: its 3g and 1g profile names (NVIDIA MIG user guide, tables 6-8).
NAMES = {
    "dgx-h100": ("3g.40gb", "1g.10gb"),
    "hgx-h200": ("3g.71gb", "1g.18gb"),
    "hgx-a100-sxm": ("3g.40gb", "1g.10gb"),
    "a100-pcie-bridged": ("3g.20gb", "1g.5gb"),
}


def backend(name: str = "dgx-h100", *, enabled: bool = True) -> tuple[FakeNvml, NvmlBackend]:
    fake = FakeNvml(resolve_profiles(name)[0], "node-m", mig_enabled=enabled)
    return fake, NvmlBackend(fake)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_instances_are_created_where_the_layout_says_and_read_back(name: str) -> None:
    three, one = NAMES[name]
    fake, nvml = backend(name)
    created = [nvml.mig.create(2, three, 4), nvml.mig.create(2, one, 0), nvml.mig.create(2, one, 2)]
    assert [(i.profile, i.start, i.size) for i in created] == [(three, 4, 4), (one, 0, 1), (one, 2, 1)]
    assert nvml.mig.instances(2) == tuple(sorted(created, key=lambda i: i.start))
    assert len({i.uuid for i in created}) == 3 and all(i.uuid.startswith("MIG-") for i in created)
    assert fake.calls["nvmlDeviceCreateGpuInstanceWithPlacement"] == 3
    assert fake.calls["nvmlDeviceCreateGpuInstance"] == 0
    assert [len(gi.computes) for gi in fake.mig_gpus[2].instances.values()] == [1, 1, 1]


def test_the_compute_instance_fills_the_gpu_instance() -> None:
    fake, nvml = backend()
    nvml.mig.create(0, "7g.80gb", 0)
    [instance] = fake.mig_gpus[0].instances.values()
    assert list(instance.computes.values()) == [pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE]


def test_a_start_the_profile_does_not_allow_is_refused_with_the_allowed_ones() -> None:
    _fake, nvml = backend()
    with pytest.raises(
        BackendError, match=r"3g\.40gb cannot start at slice 2 on GPU 0 \(allowed starts: 0, 4\)"
    ):
        nvml.mig.create(0, "3g.40gb", 2)


def test_an_overlap_is_refused_by_the_gpu_and_nothing_is_left_behind() -> None:
    _fake, nvml = backend()
    nvml.mig.create(0, "3g.40gb", 4)
    refusal = (
        r"nvmlDeviceCreateGpuInstanceWithPlacement failed on GPU 0: Insufficient Resources \(NVML error 23\)"
    )
    with pytest.raises(BackendError, match=refusal):
        nvml.mig.create(0, "1g.20gb", 4)
    assert [(i.profile, i.start) for i in nvml.mig.instances(0)] == [("3g.40gb", 4)]


def test_a_profile_limited_to_one_instance_refuses_a_second() -> None:
    _fake, nvml = backend()
    nvml.mig.create(0, "1g.10gb+me", 0)
    with pytest.raises(BackendError, match="Insufficient Resources"):
        nvml.mig.create(0, "1g.10gb+me", 3)


def test_an_unknown_profile_lists_what_the_gpu_offers() -> None:
    _fake, nvml = backend("hgx-h200")
    with pytest.raises(BackendError, match=r"GPU 1 has no MIG profile '3g\.40gb' \(it offers: .*3g\.71gb"):
        nvml.mig.create(1, "3g.40gb", 0)


def test_creating_with_mig_mode_off_is_refused() -> None:
    _fake, nvml = backend(enabled=False)
    with pytest.raises(BackendError, match="MIG mode is not enabled"):
        nvml.mig.create(0, "3g.40gb", 0)
    assert nvml.mig.instances(0) == ()


def test_a_gpu_that_cannot_do_mig_or_does_not_exist_is_a_backend_error() -> None:
    _fake, nvml = backend("l40s-pcie")
    with pytest.raises(BackendError, match="nvmlDeviceGetMigMode failed on GPU 0: Not Supported"):
        nvml.mig.create(0, "1g.10gb", 0)
    with pytest.raises(BackendError, match="GPU 8 does not exist: the node has 8 GPUs"):
        nvml.mig.destroy(8, 0)


def test_a_failed_compute_instance_removes_its_gpu_instance_again() -> None:
    fake, nvml = backend()
    fake.fail_next(
        "nvmlGpuInstanceCreateComputeInstance", pynvml.NVMLError(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
    )
    with pytest.raises(BackendError, match="nvmlGpuInstanceCreateComputeInstance failed on GPU 3"):
        nvml.mig.create(3, "2g.20gb", 2)
    assert nvml.mig.instances(3) == () and fake.mig_gpus[3].instances == {}


def test_destroy_removes_the_compute_instances_then_the_gpu_instance() -> None:
    fake, nvml = backend()
    nvml.mig.create(0, "3g.40gb", 0)
    nvml.mig.create(0, "3g.40gb", 4)
    nvml.mig.destroy(0, 4)
    assert [(i.profile, i.start) for i in nvml.mig.instances(0)] == [("3g.40gb", 0)]
    assert (fake.calls["nvmlComputeInstanceDestroy"], fake.calls["nvmlGpuInstanceDestroy"]) == (1, 1)


def test_destroying_what_is_not_there_or_what_the_gpu_refuses_is_a_backend_error() -> None:
    fake, nvml = backend()
    with pytest.raises(BackendError, match="no MIG GPU instance starts at slice 4 on GPU 0"):
        nvml.mig.destroy(0, 4)
    nvml.mig.create(0, "3g.40gb", 4)
    fake.fail_next("nvmlGpuInstanceDestroy", pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE))
    with pytest.raises(
        BackendError, match=r"nvmlGpuInstanceDestroy failed on GPU 0: In Use \(NVML error 19\)"
    ):
        nvml.mig.destroy(0, 4)


def test_an_instance_running_a_process_is_in_use() -> None:
    fake, nvml = backend()
    nvml.mig.create(0, "3g.40gb", 0)
    nvml.mig.create(0, "3g.40gb", 4)
    fake.run_process(0, 4)
    assert [i.in_use for i in nvml.mig.instances(0)] == [False, True]
