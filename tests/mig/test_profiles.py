"""The shipped MIG profile table: it loads, it agrees with NVML's names, products find their model."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pynvml
import pytest
import yaml

from optsched.mig.profiles import MigTableError, model_for, models, normalize_product, parse_table

SHIPPED = resources.files("optsched.mig").joinpath("profiles.yaml").read_text(encoding="utf-8")


def _table() -> dict[str, Any]:
    raw = yaml.safe_load(SHIPPED)
    assert isinstance(raw, dict)
    return raw


def _parse(raw: dict[str, Any]) -> None:
    parse_table(yaml.safe_dump(raw), source="bad.yaml")


def test_the_four_models_load_with_seven_profiles_each() -> None:
    assert [m.name for m in models()] == ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"]
    assert all(len(m.profiles) == 7 for m in models())


def test_only_the_h200_placements_are_marked_inferred() -> None:
    assert {m.name: m.placements_inferred for m in models()} == {
        "A100-40GB": False,
        "A100-80GB": False,
        "H100-80GB": False,
        "H200-141GB": True,
    }


def test_every_nvml_profile_name_is_an_nvml_constant() -> None:
    for model in models():
        for profile in model.profiles:
            assert isinstance(getattr(pynvml, profile.nvml_profile, None), int), (model.name, profile.name)


def test_one_nvml_profile_has_one_profile_id_and_one_shape_in_every_model() -> None:
    seen: dict[str, tuple[int, int, int, tuple[int, ...]]] = {}
    for model in models():
        for p in model.profiles:
            shape = (p.profile_id, p.compute, p.memory_slices, p.starts)
            assert seen.setdefault(p.nvml_profile, shape) == shape, (model.name, p.name)
    assert {k: v[0] for k, v in seen.items()} == {
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE": 19,
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1": 20,
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2": 15,
        "NVML_GPU_INSTANCE_PROFILE_2_SLICE": 14,
        "NVML_GPU_INSTANCE_PROFILE_3_SLICE": 9,
        "NVML_GPU_INSTANCE_PROFILE_4_SLICE": 5,
        "NVML_GPU_INSTANCE_PROFILE_7_SLICE": 0,
    }


def test_profiles_with_media_extensions_allow_one_instance() -> None:
    me = [p for m in models() for p in m.profiles if p.name.endswith("+me")]
    assert len(me) == len(models())
    assert {p.max_instances for p in me} == {1}


def test_profile_lookup() -> None:
    h100 = model_for("NVIDIA-H100-80GB-HBM3")
    assert h100 is not None
    profile = h100.profile("3g.40gb")
    assert profile is not None and (profile.starts, profile.memory_slices) == ((0, 4), 4)
    assert h100.profile("3g.20gb") is None


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA-H100-PCIe", "H100-80GB"),
        ("NVIDIA-H200", "H200-141GB"),
        ("NVIDIA-H200-141GB-HBM3", "H200-141GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("nvidia-a100-80gb-pcie", "A100-80GB"),
        ("NVIDIA-A100-SXM4-40GB-SHARED", "A100-40GB"),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB"),
    ],
)
def test_a_listed_product_finds_its_model_in_any_spelling(product: str, model: str) -> None:
    found = model_for(product)
    assert found is not None and found.name == model


@pytest.mark.parametrize(
    ("product", "memory_mib", "model"),
    [
        ("NVIDIA-A100-SXM-NEW", 40536, "A100-40GB"),
        ("NVIDIA-A100-SXM-NEW", 81920, "A100-80GB"),
        ("NVIDIA-H100-SXM5-80GB", 81559, "H100-80GB"),
        ("NVIDIA-H200-SXM-141GB", 143771, "H200-141GB"),
    ],
)
def test_an_unlisted_name_matches_by_family_and_memory(product: str, memory_mib: int, model: str) -> None:
    found = model_for(product, memory_mib)
    assert found is not None and found.name == model
    assert model_for(product) is None, "without the memory the family alone does not decide"


@pytest.mark.parametrize(
    ("product", "memory_mib"),
    [
        ("NVIDIA-H100-NVL", 95830),
        ("NVIDIA-GH200-480GB", 97871),
        ("Tesla-T4", 15360),
        ("NVIDIA-L40S", 46068),
        ("NVIDIA-A100-SXM4-NEW", 24000),
    ],
)
def test_gpus_without_a_table_have_no_model(product: str, memory_mib: int) -> None:
    assert model_for(product, memory_mib) is None


def test_normalize_product_drops_gfd_suffixes_and_case() -> None:
    assert normalize_product("NVIDIA A100-SXM4-40GB") == "nvidia-a100-sxm4-40gb"
    assert normalize_product("NVIDIA-A100-SXM4-40GB-MIG-3g.20gb") == "nvidia-a100-sxm4-40gb"
    assert normalize_product("NVIDIA-H100-80GB-HBM3-SHARED") == "nvidia-h100-80gb-hbm3"


def _edit_profile(raw: dict[str, Any], **fields: object) -> dict[str, Any]:
    raw["models"][0]["profiles"][3].update(fields)
    return raw


def test_the_shipped_text_parses_to_the_loaded_models() -> None:
    assert parse_table(SHIPPED) == models()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: r.update(version=2), "field version: expected 1"),
        (lambda r: r["models"][0].update(colour="green"), "models.0.colour"),
        (lambda r: r["models"][1].pop("source"), "models.1.source"),
        (lambda r: _edit_profile(r, compute="2"), "models.0.profiles.3.compute"),
        (lambda r: _edit_profile(r, starts=[0, 2, 7]), "profile 2g.10gb: field starts: every start"),
        (lambda r: _edit_profile(r, starts=[2, 0]), "field starts: expected distinct starts in increasing"),
        (lambda r: _edit_profile(r, name="3g.10gb"), "field compute: the name says 3, got 2"),
        (lambda r: _edit_profile(r, name="2g-10gb"), "field name: expected <N>g.<M>gb"),
        (lambda r: _edit_profile(r, max_instances=4), "field max_instances: more instances than placements"),
        (lambda r: _edit_profile(r, nvml_profile="NVML_GPU_INSTANCE_PROFILE_5"), "no NVML GPU instance"),
        (lambda r: _edit_profile(r, profile_id=19), "field profiles[].profile_id: repeated 19"),
        (lambda r: _edit_profile(r, name="1g.5gb", compute=1), "field profiles[].name: repeated 1g.5gb"),
        (lambda r: r["models"][1].update(name="A100-40GB"), "field models[].name: repeated A100-40GB"),
        (
            lambda r: r["models"][1]["products"].append("nvidia a100-sxm4-40gb"),
            "nvidia a100-sxm4-40gb is also listed by A100-40GB",
        ),
        (lambda r: r["models"][1].update(total_memory_mib=[40000, 90000]), "ranges of one family overlap"),
        (lambda r: r["models"][0].update(total_memory_mib=[9, 3]), "field total_memory_mib: expected [low"),
    ],
)
def test_a_broken_table_names_the_field(edit: Any, expected: str) -> None:
    raw = _table()
    edit(raw)
    with pytest.raises(MigTableError) as caught:
        _parse(raw)
    assert str(caught.value).startswith("bad.yaml:")
    assert expected in str(caught.value)


def test_a_table_that_is_not_yaml_is_named() -> None:
    with pytest.raises(MigTableError, match=r"^bad\.yaml: not YAML"):
        parse_table("models: [unclosed", source="bad.yaml")
