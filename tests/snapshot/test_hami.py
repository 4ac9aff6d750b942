"""HAMi nodes and pods read as HAMi runs them: physical GPUs, split counts, HAMi's own assignments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optsched.kueue.quota import pod_quota_amounts
from optsched.model.snapshot import AssumedPod, PodRequest
from optsched.snapshot.build import snapshot_from_objects
from optsched.snapshot.hami import COLON_FORMAT, JSON_FORMAT, read_register
from optsched.snapshot.pods import pod_request

# Registered by HAMi's device plugin on a two-GPU node (HAMi issue #1565): the JSON form its newer
# releases write (Go omits the zero index of the first device) and the colon form of older ones.
GTX_JSON = json.dumps(
    [
        {
            "id": "GPU-c68a7b57-2e7c-82e7-5544-ba780116e140",
            "count": 10,
            "devmem": 4096,
            "devcore": 100,
            "type": "NVIDIA-NVIDIA GeForce GTX 1050",
            "mode": "hami-core",
            "health": True,
        },
        {
            "id": "GPU-331e028c-15b8-e878-7c68-0c2d231b0932",
            "index": 1,
            "count": 10,
            "devmem": 4096,
            "devcore": 100,
            "type": "NVIDIA-NVIDIA GeForce GTX 1050",
            "mode": "hami-core",
            "health": True,
        },
    ]
)
GTX_COLONS = (
    "GPU-c68a7b57-2e7c-82e7-5544-ba780116e140,10,4096,100,NVIDIA-NVIDIA GeForce GTX 1050,0,true,0,hami-core:"
    "GPU-331e028c-15b8-e878-7c68-0c2d231b0932,10,4096,100,NVIDIA-NVIDIA GeForce GTX 1050,0,true,1,hami-core:"
)
GPU0, GPU1 = "GPU-c68a7b57-2e7c-82e7-5544-ba780116e140", "GPU-331e028c-15b8-e878-7c68-0c2d231b0932"
# The 7-field form of HAMi's protocol document (two V100s).
V100_COLONS = (
    "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
)
# H20s listed out of index order (HAMi issue #1422, three of its eight devices).
H20_COLONS = (
    "GPU-40c0923a-6172-5f3c-d299-4f6eaf218ad5,10,258787,500,NVIDIA-NVIDIA H20-3e,0,true,1,mig:"
    "GPU-22e5bae0-3938-7cc7-cab3-3f2b91e20774,10,258787,500,NVIDIA-NVIDIA H20-3e,0,true,2,mig:"
    "GPU-c6a9ed1a-e4f8-f17b-845b-7c76ba095a82,10,258787,500,NVIDIA-NVIDIA H20-3e,0,true,0,mig:"
)


def hami_node(
    name: str = "h1", register: str = GTX_JSON, advertised: int = 20, **labels: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"hami.io/node-nvidia-register": register},
        },
        "status": {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": str(advertised)}
        },
    }


def vgpu_pod(
    name: str, resources: dict[str, Any], annotations: dict[str, str] | None = None, node: str = "h1"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": resources}}]},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize(("register", "fmt"), [(GTX_JSON, JSON_FORMAT), (GTX_COLONS, COLON_FORMAT)])
def test_a_hami_node_has_its_physical_gpus_not_the_advertised_vgpus(register: str, fmt: str) -> None:
    assert read_register(register).format == fmt
    snap = snapshot_from_objects([hami_node(register=register, advertised=20)])
    (node,) = snap.nodes
    assert node.hami and node.gpu_count == 2
    assert node.gpu_memory_mib == 4096 and node.gpu_split == 10
    assert node.gpu_uuids == (GPU0, GPU1)
    assert node.gpu_product == "NVIDIA-GeForce-GTX-1050"
    assert snap.total_gpus == 2 and snap.warnings == ()


def test_the_seven_field_format_numbers_gpus_in_order_and_gfd_names_the_product() -> None:
    snap = snapshot_from_objects(
        [hami_node(register=V100_COLONS, **{"nvidia.com/gpu.product": "Tesla-V100"})]
    )
    (node,) = snap.nodes
    assert node.gpu_count == 2 and node.gpu_memory_mib == 32768
    assert node.gpu_uuids[0] == "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
    assert node.gpu_product == "Tesla-V100"


def test_index_fields_number_the_gpus_wherever_they_are_listed() -> None:
    devices = read_register(H20_COLONS).devices
    assert [d.uuid[:12] for d in devices] == ["GPU-c6a9ed1a", "GPU-40c0923a", "GPU-22e5bae0"]
    assert [d.index for d in devices] == [0, 1, 2]


def test_unhealthy_devices_and_a_node_advertising_no_gpu() -> None:
    sick = GTX_COLONS.replace("0,true,1,hami-core", "0,false,1,hami-core")
    (node,) = snapshot_from_objects([hami_node(register=sick)]).nodes
    assert node.unhealthy_gpus == frozenset({1})
    (gone,) = snapshot_from_objects([hami_node(register=GTX_JSON, advertised=0)]).nodes
    assert gone.gpu_count == 2 and gone.healthy_gpus == ()


@pytest.mark.parametrize(
    ("register", "expected"),
    [
        (
            '[{"id": "GPU-a", "count": "ten"}]',
            "JSON list of devices: device 0: 'count' must be a whole number",
        ),
        ("[{", "JSON list of devices: not valid JSON"),
        ("[]", "JSON list of devices: it lists no GPU"),
        ("GPU-a,10,4096,100,NVIDIA-T4:", "colon-separated devices: device 0 has 5 fields, expected 7"),
        (
            "GPU-a,10,lots,100,NVIDIA-T4,0,true:",
            "colon-separated devices: device 0: devmem must be a whole number",
        ),
        ("GPU-a,10,4096,100,T4,0,true:GPU-a,10,4096,100,T4,0,true:", "a GPU UUID appears twice"),
    ],
)
def test_a_malformed_register_annotation_leaves_the_node_out_with_a_warning(
    register: str, expected: str
) -> None:
    snap = snapshot_from_objects([hami_node("bad", register=register), hami_node("good")])
    assert [n.name for n in snap.nodes] == ["good"]
    (warning,) = snap.warnings
    assert warning.startswith("Node bad: annotation hami.io/node-nvidia-register is malformed (")
    assert expected in warning and warning.endswith("node left out of planning")


def test_a_vgpu_pod_takes_memory_and_cores_of_the_gpu_hami_gave_it() -> None:
    share = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}
    memory_only = {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1024}
    snap = snapshot_from_objects(
        [
            hami_node(),
            vgpu_pod("a", share, {"hami.io/vgpu-devices-allocated": f"{GPU1},NVIDIA,1000,30:;"}),
            vgpu_pod(
                "b",
                memory_only,
                {"hami.io/vgpu-devices-to-allocate": f"{GPU0},NVIDIA,1024,0:{GPU1},NVIDIA,1024,0:;"},
            ),
        ]
    )
    usage = snap.usage_of("h1")
    assert usage.gpu_mem_mib == (1024, 2024)
    assert usage.gpu_milli == (250, 300 + 250)  # no cores reserved: counted by the memory fraction
    assert usage.gpu_tasks == (1, 2)
    assert usage.unknown_index_gpus == 0 and snap.warnings == ()


def test_a_gpu_pod_without_hamis_record_holds_gpus_of_unknown_index() -> None:
    snap = snapshot_from_objects(
        [hami_node(), vgpu_pod("pinned", {"nvidia.com/gpu": 1}, {"optsched.io/gpus": "0"})]
    )
    usage = snap.usage_of("h1")
    assert usage.unknown_index_gpus == 1 and usage.gpu_milli == (0, 0)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ("GPU-elsewhere,NVIDIA,1000,30:;", "GPU GPU-elsewhere is not in the node's register annotation"),
        (f"{GPU0},NVIDIA,lots,30:;", "container 0: memory must be a whole number"),
        (f"{GPU0},NVIDIA,1000:;", "is not uuid,type,memory,cores"),
        (f"{GPU0},NVIDIA,1000,30:;", "it lists 1 NVIDIA devices, the pod asks for 2"),
    ],
)
def test_an_unreadable_hami_record_counts_as_unknown_index_with_a_warning(record: str, expected: str) -> None:
    pod = vgpu_pod("p", {"nvidia.com/gpu": 2}, {"hami.io/vgpu-devices-allocated": record})
    snap = snapshot_from_objects([hami_node(), pod])
    assert snap.usage_of("h1").unknown_index_gpus == 2
    (warning,) = snap.warnings
    assert warning.startswith("Pod ns/p: annotation hami.io/vgpu-devices-allocated is malformed (")
    assert expected in warning


def _request(*containers: dict[str, Any]) -> PodRequest:
    spec = {"containers": [{"name": f"c{i}", "resources": {"limits": c}} for i, c in enumerate(containers)]}
    return pod_request(spec, obj={"kind": "Pod", "metadata": {"name": "p"}}, field="spec")


def test_n_gpus_with_gpumem_are_n_shares_of_that_memory_each() -> None:
    req = _request({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 25})
    assert req.is_share and req.gpus == 2
    assert req.gpu_mem_mib == 4000 and req.gpu_milli == 250
    assert req.gpu_equivalent == pytest.approx(0.5)
    whole = _request({"nvidia.com/gpu": 2})
    assert not whole.is_share and whole.gpu_equivalent == 2


def test_memory_percentage_and_hamis_default_memory() -> None:
    percent = _request({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50})
    assert percent.is_share and percent.share_memory(16_000) == 8_000
    assert not _request({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100}).is_share
    cores = _request({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30})
    assert cores.share_memory(16_000) == 0 and cores.share_memory(16_000, hami=True) == 16_000
    both = _request({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpumem-percentage": 50})
    assert both.gpu_mem_percent == 0  # HAMi takes gpumem where both are given


def test_containers_are_read_one_by_one() -> None:
    # Share resources without a GPU count get one device, as HAMi's webhook gives it.
    implied = _request({"nvidia.com/gpumem": 2000})
    assert implied.gpus == 1 and implied.is_share and implied.gpu_mem_mib == 2000
    assert _request({"nvidia.com/gpu": 0, "nvidia.com/gpumem": 2000}).gpus == 0
    two = _request(
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}
    )
    assert two.gpus == 2 and two.is_share and two.gpu_mem_mib == 3000
    mixed = _request({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})
    assert mixed.gpus == 2 and not mixed.is_share


def test_kueue_quota_counts_share_resources_as_the_containers_write_them() -> None:
    req = _request({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 25, "cpu": "1"})
    amounts = pod_quota_amounts(req)
    assert amounts["nvidia.com/gpu"] == 2
    assert amounts["nvidia.com/gpumem"] == 4000 and amounts["nvidia.com/gpucores"] == 25


def test_a_pod_assumed_on_a_hami_node_holds_gpus_of_unknown_index() -> None:
    # HAMi, not the plan, picks the devices, so the planned index is no record of where it will run.
    share = PodRequest(gpus=1, gpu_milli=300, gpu_mem_mib=1000)
    assumed = [AssumedPod(workload="ns/a", node="h1", request=share, gpus=(1,))]
    usage = snapshot_from_objects([hami_node()], assumed=assumed).usage_of("h1")
    assert usage.unknown_index_gpus == 1 and usage.gpu_milli == (0, 0)
