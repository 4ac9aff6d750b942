"""The YAML view: the same document as the JSON view, for people who diff YAML."""

from __future__ import annotations

from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.snapshot.kubeyaml import dump_yaml


def render_yaml(snapshot: Snapshot, plan: Plan) -> str:
    del snapshot
    return dump_yaml(plan.to_json_dict())
