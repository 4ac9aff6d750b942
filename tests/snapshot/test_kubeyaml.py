"""YAML written by optsched keeps its string types in Go YAML readers."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from optsched.snapshot.documents import dump_objects, read_documents
from optsched.snapshot.kubeyaml import dump_yaml, dump_yaml_all

# go-yaml's plain-scalar float rule (sigs.k8s.io/yaml resolves these to numbers).
GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _plain_scalars(text: str) -> list[str]:
    """The unquoted scalar values of a flat block mapping."""
    values = [line.split(": ", 1)[1] for line in text.splitlines() if ": " in line]
    return [v for v in values if not v.startswith(("'", '"'))]


def test_strings_a_go_reader_takes_for_numbers_are_quoted() -> None:
    values = {"suffix": "3134e8", "exp": "1e5", "signed": "+1e-3", "dotted": "1.5e3", "frac": ".5"}
    text = dump_yaml(values)
    assert not [v for v in _plain_scalars(text) if GO_FLOAT.fullmatch(v)]
    assert yaml.safe_load(text) == values


def test_ordinary_strings_and_numbers_stay_plain() -> None:
    text = dump_yaml({"node": "h100-001", "word": "e8", "count": 3, "share": 0.5})
    assert text.splitlines() == ["node: h100-001", "word: e8", "count: 3", "share: 0.5"]


def test_several_documents_round_trip() -> None:
    docs = [{"name": "1e5"}, {"name": "rack-2"}]
    text = dump_yaml_all(docs)
    assert text.count("---") == 1
    assert list(yaml.safe_load_all(text)) == docs


def test_a_snapshot_list_keeps_a_numeric_looking_label_a_string(tmp_path: Path) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n-1", "labels": {"example.com/pool": "3134e8"}},
    }
    path = tmp_path / "snapshot.yaml"
    dump_objects([node], path)
    assert "'3134e8'" in path.read_text()
    assert read_documents(path)[0]["metadata"]["labels"]["example.com/pool"] == "3134e8"
