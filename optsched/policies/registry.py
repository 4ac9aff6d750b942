"""Every placement policy by name, so the CLI and the benchmarks run them the same way.

The optimizer and the greedy baselines all return a :class:`~optsched.plan.Plan`
built from the same snapshot, which is what makes "optimizer vs. BestFit" a
fair comparison: same filters, same gang and quota rules, same summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from optsched.assignment import Placement
from optsched.errors import InputError
from optsched.fragmentation import typical_shapes
from optsched.model import Snapshot
from optsched.plan import Plan, PlanStatus
from optsched.planbuild import build_plan, pending_requests
from optsched.policies.choosers import make_chooser
from optsched.policies.greedy import greedy_placement, tas_placement
from optsched.settings import Settings

POLICIES = ("optimizer", "firstfit", "bestfit", "fgd", "tas", "leastallocated")


def _chooser_policy(name: str) -> Callable[[Snapshot], Placement]:
    def run(snapshot: Snapshot) -> Placement:
        shapes = typical_shapes(pending_requests(snapshot)) if name == "fgd" else []
        return greedy_placement(snapshot, make_chooser(name, shapes))

    return run


_BASELINES: dict[str, Callable[[Snapshot], Placement]] = {
    "firstfit": _chooser_policy("firstfit"),
    "bestfit": _chooser_policy("bestfit"),
    "fgd": _chooser_policy("fgd"),
    "leastallocated": _chooser_policy("leastallocated"),
    "tas": tas_placement,
}


def effective_snapshot(snapshot: Snapshot, settings: Settings | None) -> Snapshot:
    """The snapshot as planned under ``settings`` (topology level override applied).

    Validate a plan against this snapshot, not the raw one, so both see the same domains.
    """
    if settings is not None and settings.topology_levels:
        return snapshot.model_copy(update={"default_topology_levels": tuple(settings.topology_levels)})
    return snapshot


def run_policy(name: str, snapshot: Snapshot, settings: Settings | None = None) -> Plan:
    """Plan ``snapshot`` with the named policy (see :data:`POLICIES`)."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    if key not in POLICIES:
        raise InputError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}", field="policy")
    snapshot = effective_snapshot(snapshot, settings)
    if key == "optimizer":
        from optsched.solver import solve

        return solve(snapshot, settings)
    started = time.perf_counter()
    placement = _BASELINES[key](snapshot)
    seconds = time.perf_counter() - started
    status = PlanStatus.HEURISTIC if snapshot.workloads else PlanStatus.EMPTY
    return build_plan(snapshot, placement, status=status, policy=key, solve_seconds=round(seconds, 4))
