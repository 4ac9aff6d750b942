"""Who holds each MIG instance: known devices, NVML's busy instances, and pods whose slice is not known."""

from __future__ import annotations

from typing import Any

from optsched.agent.devices import Discovery, GpuDevice, MigInstance
from optsched.agent.mig_users import Holders, asked_profiles, holders
from optsched.agent.podresources import ContainerDevices, PodDevices
from optsched.mig.layout import MigSlot

H100 = "NVIDIA-H100-80GB-HBM3"


def _gpu(index: int, *instances: tuple[str, int, int], busy: int | None = None) -> GpuDevice:
    return GpuDevice(
        index=index,
        minor=index,
        uuid=f"GPU-{index}",
        pci_bus_id=f"00000000:1{index}:00.0",
        product=H100,
        memory_mib=81559,
        mig_capable=True,
        mig_enabled=bool(instances),
        mig_instances=tuple(
            MigInstance(profile, start, size, f"MIG-{index}-{start}", in_use=start == busy)
            for profile, start, size in instances
        ),
    )


DISCOVERY = Discovery(
    gpus=(
        _gpu(0, ("3g.40gb", 0, 4), ("3g.40gb", 4, 4)),
        _gpu(1, ("3g.40gb", 0, 4), ("1g.10gb", 4, 1), ("1g.10gb", 5, 1), busy=5),
        _gpu(2),
    )
)


def _held(name: str, resource: str, *ids: str) -> PodDevices:
    return PodDevices("team", name, (ContainerDevices("main", ((resource, ids),)),))


def _pod(name: str, limits: dict[str, Any], part: str = "containers") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {part: [{"name": "main", "resources": {"limits": limits}}]},
    }


def test_a_pod_holding_a_mig_device_holds_that_instance_only() -> None:
    pod = _pod("infer", {"nvidia.com/mig-3g.40gb": "1"})
    found = holders([_held("infer", "nvidia.com/mig-3g.40gb", "MIG-0-4")], DISCOVERY, [pod])
    assert found.instances == {(0, 4): ("team/infer",)}
    assert found.whole == {}


def test_a_pod_holding_a_whole_gpu_is_named_for_that_gpu() -> None:
    found = holders([_held("train", "nvidia.com/gpu", "GPU-2")], DISCOVERY, [])
    assert found.whole == {2: ("team/train",)}
    assert found.blocking(2, (), [MigSlot("7g.80gb", 0)]) == ["GPU 2 is held whole by team/train"]


def test_a_pod_whose_slice_is_unknown_may_hold_every_instance_of_its_profile() -> None:
    found = holders([], DISCOVERY, [_pod("infer", {"nvidia.com/mig-3g.40gb": 1})])
    maybe = ("team/infer (asks for 3g.40gb; which instance it holds is not known)",)
    assert found.instances == {(0, 0): maybe, (0, 4): maybe, (1, 0): maybe}


def test_a_pod_holding_fewer_known_instances_than_it_asks_may_hold_any_other() -> None:
    pod = _pod("pair", {"nvidia.com/mig-1g.10gb": "2"})
    found = holders([_held("pair", "nvidia.com/mig-1g.10gb", "MIG-1-4")], DISCOVERY, [pod])
    assert found.instances[(1, 4)][0] == "team/pair"
    assert "which instance it holds is not known" in found.instances[(1, 5)][-1]


def test_sidecars_and_unreadable_counts_are_counted_conservatively() -> None:
    assert asked_profiles(_pod("a", {"nvidia.com/mig-1g.10gb": "2"}, "initContainers")) == {"1g.10gb": 2}
    assert asked_profiles(_pod("b", {"nvidia.com/mig-1g.10gb": "lots"}))["1g.10gb"] > 7
    assert asked_profiles({"spec": "mangled"}) == {}
    pod = _pod("c", {"nvidia.com/mig-1g.10gb": "lots"})
    found = holders([_held("c", "nvidia.com/mig-1g.10gb", "MIG-1-4")], DISCOVERY, [pod])
    assert (1, 5) in found.instances, "a count that cannot be read is never taken as satisfied"


def test_blocking_names_only_what_the_layout_removes() -> None:
    found = holders([_held("infer", "nvidia.com/mig-3g.40gb", "MIG-1-0")], DISCOVERY, [])
    current = DISCOVERY.by_index(1).mig_instances
    keep_all_used = [MigSlot("3g.40gb", 0), MigSlot("1g.10gb", 5), MigSlot("2g.20gb", 6)]
    assert found.blocking(1, current, keep_all_used) == []
    assert found.blocking(1, current, [MigSlot("7g.80gb", 0)]) == [
        "GPU 1: the layout removes 3g.40gb at start 0, in use by team/infer",
        "GPU 1: the layout removes 1g.10gb at start 5, in use by a process (NVML)",
    ]


def test_a_profile_change_at_the_same_start_removes_the_instance() -> None:
    found = Holders(instances={(0, 0): ("team/infer",)})
    current = DISCOVERY.by_index(0).mig_instances
    assert found.blocking(0, current, [MigSlot("4g.40gb", 0), MigSlot("3g.40gb", 4)]) == [
        "GPU 0: the layout removes 3g.40gb at start 0, in use by team/infer"
    ]
