"""Kueue TAS assignments decode to the same domains from every encoding Kueue has written."""

from __future__ import annotations

import pytest

from optsched.kueue.topology_assignment import MAX_DOMAINS, read_topology_assignment

HOST = "kubernetes.io/hostname"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"


def domains(raw: dict[str, object]) -> list[tuple[tuple[str, ...], int]]:
    return [(d.values, d.count) for d in read_topology_assignment(raw).domains]


def test_v1beta1_domains_with_values_and_counts() -> None:
    raw = {"levels": [HOST], "domains": [{"values": ["n1"], "count": 4}, {"values": ["n2"], "count": 2}]}
    assert domains(raw) == [(("n1",), 4), (("n2",), 2)]


def test_v1beta2_slices_with_a_universal_value_prefixed_roots_and_pod_counts() -> None:
    raw = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"universalValue": "block-1"}, {"prefix": "rack-", "roots": ["1", "2"]}],
                "podCounts": [4, 2],
            }
        ],
    }
    assert domains(raw) == [(("block-1", "rack-1"), 4), (("block-1", "rack-2"), 2)]


def test_v1beta2_slices_with_a_suffix_and_a_universal_pod_count_across_slices() -> None:
    raw = {
        "levels": [HOST],
        "slices": [
            {"domainCount": 2, "valuesPerLevel": [{"prefix": "b1-", "roots": ["1", "2"], "suffix": "-x"}],
             "universalPodCount": 1},
            {"domainCount": 1, "valuesPerLevel": [{"roots": ["b2-1"]}], "universalPodCount": 3},
        ],
    }  # fmt: skip
    assert domains(raw) == [(("b1-1-x",), 1), (("b1-2-x",), 1), (("b2-1",), 3)]


def test_slices_in_the_nested_universal_individual_form() -> None:
    raw = {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "node-", "roots": ["a", "b"]}}],
                "podCounts": {"individual": [1, 2]},
            },
            {"domainCount": 1, "valuesPerLevel": [{"universal": "node-c"}], "podCounts": {"universal": 5}},
        ],
    }
    assert domains(raw) == [(("node-a",), 1), (("node-b",), 2), (("node-c",), 5)]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"levels": [], "domains": []}, "topologyAssignment.levels"),
        ({"levels": [HOST], "domains": [{"values": ["a", "b"], "count": 1}]}, "domains[0].values"),
        ({"levels": [HOST], "domains": [{"values": ["a"], "count": -1}]}, "domains[0].count"),
        ({"levels": [HOST], "slices": [{"domainCount": 2, "valuesPerLevel": [{"roots": ["a"]}],
                                        "universalPodCount": 1}]}, "slices[0].valuesPerLevel[0].roots"),
        ({"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [{"roots": ["a"]}],
                                        "podCounts": [1, 2]}]}, "slices[0].podCounts"),
        ({"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": []}]},
         "slices[0].valuesPerLevel"),
        ({"levels": [HOST], "slices": "all"}, "topologyAssignment.slices"),
    ],
)  # fmt: skip
def test_a_malformed_assignment_names_its_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        read_topology_assignment(raw)


def test_a_huge_domain_count_is_refused_at_once() -> None:
    raw = {
        "levels": [HOST],
        "slices": [
            {"domainCount": 10**12, "valuesPerLevel": [{"universalValue": "n1"}], "universalPodCount": 1}
        ],
    }
    with pytest.raises(ValueError, match=f"more than {MAX_DOMAINS} domains"):
        read_topology_assignment(raw)
