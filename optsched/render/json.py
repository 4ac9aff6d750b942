"""The JSON view: the plan document of docs/plan-format.md, for machines.

Key order follows the Plan model's field order, so diffs between runs stay
readable; the snapshot is accepted for a uniform renderer signature.
"""

from __future__ import annotations

import json

from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot


def render_json(snapshot: Snapshot, plan: Plan) -> str:
    del snapshot
    return json.dumps(plan.to_json_dict(), indent=2, ensure_ascii=False) + "\n"
