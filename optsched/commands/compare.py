"""``optsched plan --compare``: every policy on one snapshot, each plan validated.

An invalid plan from any policy still gets its column (marked INVALID, with
the violations on stderr) so the other figures are not lost, but the command
exits 1 because a policy produced a plan that must never be applied.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from optsched.commands.common import say, write_output
from optsched.model.snapshot import Snapshot
from optsched.render.compare import (
    PolicyResult,
    render_compare_json,
    render_compare_table,
    render_compare_yaml,
)
from optsched.settings import Settings
from optsched.validate import check_plan


def run_compare(
    snapshot: Snapshot, settings: Settings, policies: Sequence[str], *, fmt: str, out: str | None
) -> int:
    # Deferred on purpose: planning imports OR-Tools, which takes about a second; --help stays instant.
    from optsched import planning
    from optsched.planning.planner import effective_snapshot

    results = []
    for policy in policies:
        started = time.perf_counter()
        plan = planning.plan(snapshot, settings, policy, check=False)
        seconds = time.perf_counter() - started
        violations = check_plan(effective_snapshot(snapshot, settings), plan)
        for violation in violations:
            say(f"error: policy {policy} produced an invalid plan: {violation}")
        results.append(PolicyResult(policy=policy, plan=plan, seconds=seconds, violations=violations))
    if fmt == "json":
        text = render_compare_json(results, source=snapshot.source)
    elif fmt == "yaml":
        text = render_compare_yaml(results, source=snapshot.source)
    else:
        text = render_compare_table(results, source=snapshot.source)
    write_output(text, out)
    return 0 if all(r.valid for r in results) else 1
