"""The YAML view: the same document as the JSON view, for people who diff YAML."""

from __future__ import annotations

from optsched.model import Snapshot
from optsched.plan import Plan
from optsched.yamlio import dump_yaml


def render_yaml(snapshot: Snapshot, plan: Plan) -> str:
    del snapshot
    return dump_yaml(plan.to_json_dict())
