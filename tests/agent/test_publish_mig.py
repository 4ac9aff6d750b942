"""The MIG part of ``status.gpus``: an instance a pod holds, or may hold, is published in use."""

from __future__ import annotations

from optsched.agent.devices import Discovery, GpuDevice, MigInstance
from optsched.agent.health import HEALTHY
from optsched.agent.mig_users import holders
from optsched.agent.podresources import ContainerDevices, PodDevices
from optsched.agent.publish import gpus_view


def _discovery() -> Discovery:
    instances = (
        MigInstance("1g.10gb", 0, 1, uuid="MIG-a"),
        MigInstance("1g.10gb", 1, 1, uuid="MIG-c"),
        MigInstance("3g.40gb", 4, 4, uuid="MIG-b", in_use=True),
    )
    gpu = GpuDevice(
        index=0,
        minor=0,
        uuid="GPU-0",
        pci_bus_id="00000000:18:00.0",
        product="NVIDIA-H100-80GB-HBM3",
        memory_mib=81559,
        mig_capable=True,
        mig_enabled=True,
        mig_instances=instances,
    )
    return Discovery(gpus=(gpu,))


def test_an_instance_is_in_use_when_nvml_says_so_or_a_pod_holds_it() -> None:
    held = [PodDevices("ml", "infer", (ContainerDevices("c", (("nvidia.com/mig-1g.10gb", ("MIG-a",)),)),))]
    view = gpus_view(_discovery(), [[0]], {0: HEALTHY}, frozenset(holders(held, _discovery(), []).instances))
    in_use = {(i["profile"], i["start"]): i["inUse"] for i in view[0]["mig"]["instances"]}
    assert in_use == {("1g.10gb", 0): True, ("1g.10gb", 1): False, ("3g.40gb", 4): True}
    alone = gpus_view(_discovery(), [[0]], {0: HEALTHY})
    assert [i["inUse"] for i in alone[0]["mig"]["instances"]] == [False, False, True]
    # A pod asks for a 1g and the node does not say which it got: every 1g may be its.
    asking = {
        "metadata": {"namespace": "ml", "name": "nb"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]},
    }
    unknown = gpus_view(
        _discovery(), [[0]], {0: HEALTHY}, frozenset(holders([], _discovery(), [asking]).instances)
    )
    assert [i["inUse"] for i in unknown[0]["mig"]["instances"]] == [True, True, True]
