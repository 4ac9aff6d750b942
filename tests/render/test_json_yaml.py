from __future__ import annotations

import json

import yaml

from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.render.json import render_json
from optsched.render.yaml import render_yaml

TOP_KEYS = {"status", "solveSeconds", "objective", "bound", "gap", "workloads", "summary"}


def test_json_follows_the_contract(small_snapshot: Snapshot, small_plan: Plan) -> None:
    doc = json.loads(render_json(small_snapshot, small_plan))
    assert doc.keys() >= TOP_KEYS
    assert list(doc)[:2] == ["status", "policy"]
    train = next(w for w in doc["workloads"] if w["name"] == "ml/train")
    assert train["decision"] == "admit"
    pod = train["podSets"][0]["pods"][1]
    assert {k: pod[k] for k in ("index", "node", "gpus")} == {
        "index": 1,
        "node": "h100-02",
        "gpus": list(range(8)),
    }
    big = next(w for w in doc["workloads"] if w["name"] == "ml/big")
    assert big["decision"] == "defer" and big["reasons"]
    assert doc["summary"]["fragmentationBefore"] == 3.5


def test_yaml_is_the_same_document(small_snapshot: Snapshot, small_plan: Plan) -> None:
    from_yaml = yaml.safe_load(render_yaml(small_snapshot, small_plan))
    assert from_yaml == json.loads(render_json(small_snapshot, small_plan))
    assert list(from_yaml) == list(small_plan.to_json_dict())
