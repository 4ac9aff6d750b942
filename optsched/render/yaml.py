"""The YAML view: the same document as the JSON view, for people who diff YAML."""

from __future__ import annotations

import yaml

from optsched.model import Snapshot
from optsched.plan import Plan


def render_yaml(snapshot: Snapshot, plan: Plan) -> str:
    del snapshot
    return yaml.safe_dump(plan.to_json_dict(), sort_keys=False, allow_unicode=True, width=120)
