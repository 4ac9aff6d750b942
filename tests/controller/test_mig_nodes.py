"""Reading NodeGPUs for the MIG rules: the record round-trips; anything malformed is a value, not a raise."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from optsched.controller.mig_nodes import (
    MIG_CHANGES_ANNOTATION,
    ChangeRecord,
    mig_nodes,
    parse_records,
    read_mig_node,
    records_annotation,
)
from tests.controller.objects import mig_node_gpus, node


def test_the_record_round_trips_and_an_empty_one_removes_the_annotation() -> None:
    records = [
        ChangeRecord(gpu=1, to=(("1g.10gb", 0),), workloads={"a/b": "u"}, written_at=5.0),
        ChangeRecord(gpu=0, to=(), workloads={}, written_at=1.5, failed_generation=3),
    ]
    parsed, problem = parse_records(records_annotation(records))
    assert problem is None and parsed == {r.gpu: r for r in records}
    assert records_annotation([]) is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{", "is not JSON"),
        ("[]", "expected {"),
        ('{"changes": [{"gpu": "x"}]}', "changes[0] cannot be read"),
        (7, "string"),
    ],
)
def test_an_unreadable_record_says_why(value: Any, said: str) -> None:
    records, problem = parse_records(value)
    assert records == {} and problem is not None and said in problem and MIG_CHANGES_ANNOTATION in problem


def test_a_nodegpus_is_read_with_its_spec_state_instances_and_the_slices_its_node_advertises() -> None:
    obj = mig_node_gpus(
        "n1", {0: [("3g.40gb", 4), ("1g.10gb", 0)]}, spec={0: [("3g.40gb", 4)]}, state="Pending", generation=4
    )
    advertising = node("n1")
    advertising["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "1"
    mig = read_mig_node(obj, advertising)
    assert mig.spec == {0: (("3g.40gb", 4),)} and mig.current == {0: (("1g.10gb", 0), ("3g.40gb", 4))}
    assert (mig.state, mig.generation, mig.answered, mig.failed, mig.applying) == (
        "Pending",
        4,
        True,
        False,
        False,
    )
    assert mig.advertised == {"3g.40gb": 1} and mig.uuids == {0: "GPU-n1-0"}
    assert mig.advertises((("3g.40gb", 4),)) and not mig.advertises((("1g.10gb", 0),))


def _mangled() -> list[dict[str, Any]]:
    base = mig_node_gpus("n1", {0: [("1g.10gb", 0)]}, spec={0: []}, state="Success", record="{}")
    out = []
    for path in (
        ("metadata",),
        ("spec",),
        ("status",),
        ("spec", "migLayout"),
        ("status", "gpus"),
        ("status", "migLayout"),
        ("metadata", "annotations"),
    ):
        for junk in (3, "x", None, [1], {"a": 1}):
            obj = copy.deepcopy(base)
            where = obj
            for key in path[:-1]:
                where = where[key]
            where[path[-1]] = junk
            out.append(obj)
    return out


def test_mangled_objects_never_raise() -> None:
    broken_node = {"kind": "Node", "metadata": {"name": "n1"}, "status": 5}
    for obj in _mangled():
        mig_nodes([obj, broken_node, {"kind": "Node", "metadata": 7}])
