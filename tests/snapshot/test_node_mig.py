"""The MIG part of a NodeGPUs object: instances, the model, and why a GPU's layout may not change."""

from __future__ import annotations

from typing import Any

import pytest

from optsched.errors import InputError
from optsched.snapshot.node_gpus import read_node_gpus
from optsched.snapshot.node_mig import advertised_as_reported
from tests.snapshot.raw import node_gpus
from tests.solver.mig_builders import mig_gpu, mig_node


def _mig(obj: dict[str, Any], gpu: int, *instances: tuple[str, int, bool]) -> None:
    entry = obj["status"]["gpus"][gpu]
    entry["mig"] = {
        "capable": True,
        "enabled": True,
        "instances": [
            {"profile": p, "start": s, "size": 0, "uuid": f"MIG-{gpu}-{s}", "inUse": used}
            for p, s, used in instances
        ],
    }


def _gpus(obj: dict[str, Any]):  # type: ignore[no-untyped-def]
    facts = read_node_gpus(obj)
    assert facts is not None
    return {g.index: g for g in facts.mig_gpus}


def test_a_mig_gpu_lists_its_instances_its_model_and_which_are_in_use() -> None:
    obj = node_gpus("n1", gpus=2)
    _mig(obj, 1, ("3g.40gb", 4, True), ("1g.10gb", 0, False))
    facts = read_node_gpus(obj)
    assert facts is not None and 1 in facts.topology.unhealthy  # never a whole GPU
    gpu = _gpus(obj)[1]
    assert gpu.model == "H100-80GB" and gpu.uuid == "GPU-n1-0001" and gpu.hold == ""
    assert gpu.layout == (("1g.10gb", 0), ("3g.40gb", 4))
    assert [(i.profile, i.start) for i in gpu.in_use] == [("3g.40gb", 4)]
    assert list(_gpus(obj)) == [1]


def test_an_unknown_product_or_an_illegal_layout_holds_the_gpu() -> None:
    obj = node_gpus("n1", gpus=2)
    _mig(obj, 0, ("3g.40gb", 2, False))
    _mig(obj, 1)
    obj["status"]["gpus"][1]["product"] = "NVIDIA-T4"
    gpus = _gpus(obj)
    assert "breaks the placement rules" in gpus[0].hold and "start 2" in gpus[0].hold
    assert "matches no model" in gpus[1].hold and gpus[1].model == ""


def test_a_change_in_flight_or_failed_holds_the_gpus_it_changes_only() -> None:
    obj = node_gpus("n1", gpus=3)
    for gpu in range(3):
        _mig(obj, gpu)
    obj["metadata"]["generation"] = 3
    obj["spec"]["migLayout"] = [
        {"gpu": 0, "instances": [{"profile": "7g.80gb", "start": 0}]},
        {"gpu": 1, "instances": []},
    ]
    obj["status"]["migLayout"] = {"state": "Applying", "message": "", "observedGeneration": 3}
    gpus = _gpus(obj)
    assert "in flight (Applying)" in gpus[0].hold and gpus[0].changing
    assert gpus[1].hold == "" and gpus[2].hold == ""  # already as asked; not asked
    obj["status"]["migLayout"] = {"state": "Success", "message": "", "observedGeneration": 2}
    assert "generation 2 of 3" in _gpus(obj)[0].hold
    obj["status"]["migLayout"] = {"state": "Failed", "message": "GPU 0 runs pods", "observedGeneration": 3}
    failed = _gpus(obj)[0]
    assert "failed (GPU 0 runs pods)" in failed.hold and not failed.changing  # its instances stay usable


def test_an_unhealthy_mig_gpu_is_not_planned() -> None:
    obj = node_gpus("n1", gpus=2, unhealthy=(0,))
    _mig(obj, 0)
    _mig(obj, 1)
    assert list(_gpus(obj)) == [1]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("start", 9, "memory slice 0..7"),
        ("start", "0", "memory slice 0..7"),
        ("profile", "", "MIG profile name"),
        ("inUse", "yes", "true or false"),
    ],
)
def test_a_malformed_instance_names_its_field(field: str, value: object, expected: str) -> None:
    obj = node_gpus("n1", gpus=1)
    _mig(obj, 0, ("1g.10gb", 0, False))
    obj["status"]["gpus"][0]["mig"]["instances"][0][field] = value
    with pytest.raises(InputError) as err:
        read_node_gpus(obj)
    assert f"status.gpus[0].mig.instances[0].{field}" in str(err.value) and expected in str(err.value)


def test_a_node_not_yet_advertising_its_new_layout_offers_the_smaller_count_and_no_change() -> None:
    # GPU 0 became two 3g; the device plugin still advertises the old 7g.
    node, _ = mig_node("m1", mig_gpu(0, ("3g.40gb", 0), ("3g.40gb", 4)), mig_gpu(1))
    stale = node.model_copy(update={"extended": {"nvidia.com/mig-7g.80gb": 1, "example.com/fpga": 2}})
    fixed = advertised_as_reported(stale)
    assert fixed.extended == {"nvidia.com/mig-7g.80gb": 0, "example.com/fpga": 2}
    assert all(
        "does not advertise" in g.hold and "7g.80gb 1 advertised / 0 reported" in g.hold
        for g in fixed.mig_gpus
    )
    assert advertised_as_reported(node) is node  # agreeing counts: nothing held
