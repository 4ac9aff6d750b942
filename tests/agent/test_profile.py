"""GPUHardwareProfile files: the shipped ones load and say what they model; every mistake names its field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from optsched.agent.devices import NvLink
from optsched.agent.profile import (
    SHIPPED_DIR,
    HardwareProfile,
    load_profiles,
    resolve_profiles,
    shipped_names,
)
from optsched.errors import InputError

VALID: dict[str, Any] = {
    "apiVersion": "optsched.io/v1alpha1",
    "kind": "GPUHardwareProfile",
    "metadata": {"name": "box"},
    "spec": {
        "product": "NVIDIA-A100-PCIE-40GB",
        "memoryMiB": 40536,
        "count": 4,
        "numa": [0, 0, 1, 1],
        "nvlink": {"links": [[0, 1, 12], [2, 3, 12], [1, 2, 4]]},
        "migCapable": True,
        "clique": None,
    },
}


def write(tmp_path: Path, *documents: object, text: str | None = None) -> Path:
    path = tmp_path / "hardware.yaml"
    path.write_text(text if text is not None else yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def changed(path: str, value: object) -> dict[str, Any]:
    """VALID with the field at a dotted path set (``_delete`` removes it)."""
    document = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node = document
    for key in parents:
        node = node[key]
    if value == "_delete":
        del node[last]
    else:
        node[last] = value
    return document


def test_a_valid_profile_becomes_its_typed_value(tmp_path: Path) -> None:
    [profile] = load_profiles(write(tmp_path, VALID))
    assert profile == HardwareProfile(
        name="box",
        product="NVIDIA-A100-PCIE-40GB",
        memory_mib=40536,
        count=4,
        numa=(0, 0, 1, 1),
        switch=False,
        links=(NvLink(0, 1, 12), NvLink(1, 2, 4), NvLink(2, 3, 12)),
        mig_capable=True,
        clique=None,
    )


def test_optional_fields_default_to_no_numa_no_nvlink_no_mig_no_clique(tmp_path: Path) -> None:
    document = copy.deepcopy(VALID)
    for key in ("numa", "nvlink", "migCapable", "clique"):
        del document["spec"][key]
    [profile] = load_profiles(write(tmp_path, document))
    assert (profile.numa, profile.switch, profile.links, profile.mig_capable, profile.clique) == (
        None,
        False,
        (),
        False,
        None,
    )


def test_links_are_normalised_to_the_lower_index_first(tmp_path: Path) -> None:
    [profile] = load_profiles(write(tmp_path, changed("spec.nvlink", {"links": [[3, 2, 1], [1, 0, 2]]})))
    assert profile.links == (NvLink(0, 1, 2), NvLink(2, 3, 1))


def test_a_file_may_hold_several_profiles_in_document_order(tmp_path: Path) -> None:
    second = changed("metadata.name", "other")
    path = write(tmp_path, text=f"---\n{yaml.safe_dump(VALID)}---\n---\n{yaml.safe_dump(second)}")
    assert [p.name for p in load_profiles(path)] == ["box", "other"]


BAD_CASES = [
    (changed("status", {}), "status", "unknown field; expected one of apiVersion, kind, metadata, spec"),
    (changed("metadata.labels", {}), "metadata.labels", "unknown field"),
    (changed("spec.gpus", 4), "spec.gpus", "unknown field"),
    (changed("spec.nvlink", {"ring": True}), "spec.nvlink.ring", "unknown field"),
    (changed("apiVersion", "v1"), "apiVersion", "expected optsched.io/v1alpha1"),
    (changed("kind", "Node"), "kind", "expected GPUHardwareProfile"),
    (changed("metadata.name", "Big Box"), "metadata.name", "lower-case letters"),
    (changed("metadata.name", "café"), "metadata.name", "lower-case letters"),
    (changed("metadata.name", "-box"), "metadata.name", "beginning and ending"),
    (changed("metadata", "box"), "metadata", "expected a mapping"),
    (changed("spec", [1]), "spec", "expected a mapping"),
    (changed("spec.product", "NVIDIA A100"), "spec.product", "spaces written as '-'"),
    (changed("spec.product", "_delete"), "spec.product", "GPU Feature Discovery"),
    (changed("spec.memoryMiB", 1.5), "spec.memoryMiB", "expected an integer"),
    (changed("spec.memoryMiB", 0), "spec.memoryMiB", "from 1 to"),
    (changed("spec.count", "4"), "spec.count", "expected an integer from 1 to 1024"),
    (changed("spec.count", True), "spec.count", "expected an integer"),
    (changed("spec.count", 0), "spec.count", "from 1 to 1024, got 0"),
    (changed("spec.count", 1025), "spec.count", "from 1 to 1024, got 1025"),
    (changed("spec.numa", [0, 0, 1]), "spec.numa", "expected 4 entries (one per GPU index), got 3"),
    (changed("spec.numa", [0, 0, "a", 1]), "spec.numa[2]", "expected an integer"),
    (changed("spec.numa", 0), "spec.numa", "expected a list"),
    (changed("spec.nvlink", "switch"), "spec.nvlink", "expected a mapping"),
    (changed("spec.nvlink", {"switch": True, "links": [[0, 1, 1]]}), "spec.nvlink", "got both"),
    (changed("spec.nvlink", {}), "spec.nvlink", "got neither"),
    (changed("spec.nvlink", {"switch": False}), "spec.nvlink.switch", "expected true"),
    (changed("spec.nvlink", {"links": []}), "spec.nvlink.links", "non-empty list"),
    (changed("spec.nvlink", {"links": [[0, 1]]}), "spec.nvlink.links[0]", "[gpu a, gpu b, number of links]"),
    (
        changed("spec.nvlink", {"links": [[0, 1, 1], [1, 2, 1], [2, 9, 1]]}),
        "spec.nvlink.links[2][1]",
        "GPU index 9 is out of range; expected 0 to 3",
    ),
    (
        changed("spec.nvlink", {"links": [[0, 1, 1], [2, 2, 1]]}),
        "spec.nvlink.links[1]",
        "links GPU 2 to itself",
    ),
    (
        changed("spec.nvlink", {"links": [[0, 1, 1], [1, 0, 2]]}),
        "spec.nvlink.links[1]",
        "linked already by nvlink.links[0]",
    ),
    (changed("spec.nvlink", {"links": [[0, 1, 0]]}), "spec.nvlink.links[0][2]", "expected an integer from 1"),
    (changed("spec.nvlink", {"links": [[0, "1", 1]]}), "spec.nvlink.links[0][1]", "expected a GPU index"),
    (changed("spec.migCapable", "yes"), "spec.migCapable", "expected true or false"),
    (changed("spec.clique", "abc.1"), "spec.clique", "<clusterUUID>.<cliqueId>"),
    (
        changed("spec.clique", "a1b2c3d4-0000-4000-8000-000000000001.99999999999"),
        "spec.clique",
        "number up to",
    ),
]


@pytest.mark.parametrize(("document", "field", "expected"), BAD_CASES, ids=[case[1] for case in BAD_CASES])
def test_a_bad_profile_names_the_file_the_profile_the_field_and_what_was_expected(
    tmp_path: Path, document: dict[str, Any], field: str, expected: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(InputError) as caught:
        load_profiles(path)
    error = caught.value
    assert (error.source, error.field) == (str(path), field)
    assert error.obj in ("box", "document 1")
    assert expected in error.detail
    assert str(error).startswith(f"{path}: {error.obj}: field {field}:")


def test_a_problem_before_the_name_is_known_names_the_document(tmp_path: Path) -> None:
    path = write(tmp_path, VALID, changed("kind", "Pod"))
    with pytest.raises(InputError) as caught:
        load_profiles(path)
    assert (caught.value.obj, caught.value.field) == ("document 2", "kind")


def test_a_document_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"document 1: expected a GPUHardwareProfile mapping, got list"):
        load_profiles(write(tmp_path, [1, 2]))


def test_two_profiles_of_one_name_in_a_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_profiles(write(tmp_path, VALID, VALID))
    assert (caught.value.obj, caught.value.field) == ("box", "metadata.name")
    assert "duplicate profile name 'box' (document 1 has it too)" in caught.value.detail


def test_a_missing_file_an_unreadable_one_and_non_yaml_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_profiles(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="cannot read"):
        load_profiles(tmp_path)
    with pytest.raises(InputError, match=r"not valid YAML at line \d+, column \d+"):
        load_profiles(write(tmp_path, text="spec: [unclosed\n"))
    with pytest.raises(InputError, match="holds no GPUHardwareProfile documents"):
        load_profiles(write(tmp_path, text="---\n---\n"))


def test_links_that_join_too_many_gpus_without_a_full_mesh_are_refused(tmp_path: Path) -> None:
    chain = [[i, i + 1, 1] for i in range(99)]
    document = changed("spec", {"product": "X", "memoryMiB": 1, "count": 100, "nvlink": {"links": chain}})
    with pytest.raises(InputError) as caught:
        load_profiles(write(tmp_path, document))
    assert caught.value.field == "spec.nvlink.links"
    assert "100 GPUs are NVLinked into one group" in caught.value.detail


def test_every_shipped_profile_loads_under_its_file_name_and_says_what_it_models() -> None:
    names = shipped_names()
    assert {
        "dgx-h100",
        "hgx-h200",
        "hgx-a100-sxm",
        "a100-pcie-bridged",
        "dgx1-v100",
        "l40s-pcie",
        "t4",
    } <= set(names)
    for name in names:
        path = SHIPPED_DIR / f"{name}.yaml"
        header = path.read_text(encoding="utf-8").splitlines()[:3]
        assert all(line.startswith("# ") for line in header), name
        [profile] = load_profiles(path)
        assert profile.name == name
        assert resolve_profiles(name) == resolve_profiles(str(path)) == [profile]


def test_the_shipped_profiles_carry_the_documented_facts() -> None:
    by_name = {name: resolve_profiles(name)[0] for name in shipped_names()}
    h100 = by_name["dgx-h100"]
    assert (h100.product, h100.count, h100.switch, h100.mig_capable) == (
        "NVIDIA-H100-80GB-HBM3",
        8,
        True,
        True,
    )
    assert h100.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    bridged = by_name["a100-pcie-bridged"]
    assert bridged.links == tuple(NvLink(a, a + 1, 12) for a in (0, 2, 4, 6)) and bridged.mig_capable
    v100 = by_name["dgx1-v100"]
    per_gpu = [sum(link.count for link in v100.links if gpu in (link.a, link.b)) for gpu in range(8)]
    assert per_gpu == [6] * 8
    assert {(link.a, link.b) for link in v100.links} >= {(0, 4), (1, 5), (2, 6), (3, 7)}
    assert not by_name["l40s-pcie"].links and not by_name["l40s-pcie"].switch
    assert by_name["t4"].count == 4 and not by_name["t4"].links
    tray = by_name["gb200-tray"]
    assert (tray.count, tray.switch, tray.clique) == (4, True, "a1b2c3d4-0000-4000-8000-000000000001.1")
    for profile in by_name.values():
        assert " " not in profile.product


def test_an_unknown_name_lists_the_shipped_profiles() -> None:
    with pytest.raises(InputError) as caught:
        resolve_profiles("dgx-z900")
    assert caught.value.source == "dgx-z900"
    assert "dgx-h100" in caught.value.detail and "t4" in caught.value.detail
