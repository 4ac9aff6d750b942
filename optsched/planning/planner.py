"""``plan``: the one way from a snapshot to a checked plan, for the CLI, the controller and benchmarks.

Every policy, the optimizer and each greedy baseline, produces a placement of
the same snapshot; :func:`~optsched.planning.build.build_plan` turns it into a
:class:`~optsched.model.plan.Plan` with the same filters, gang and quota rules,
reasons and summary, which is what makes "optimizer vs. BestFit" a fair
comparison. The plan is then checked by the independent validator against the
snapshot as planned (the settings' topology override and admission emulation
applied), so no caller can validate against the wrong one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from optsched.capacity.baseline import Baseline
from optsched.capacity.fragmentation import counted_shapes
from optsched.capacity.mig_choice import most_useful
from optsched.errors import InputError
from optsched.model.placement import Placement
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import Node, Snapshot, Workload
from optsched.planning.build import build_plan
from optsched.planning.summary import pending_requests
from optsched.policies.choosers import make_chooser
from optsched.policies.greedy import greedy_placement, tas_placement
from optsched.settings import Settings
from optsched.solver import solve
from optsched.validate import assert_valid

OPTIMIZER = "optimizer"
POLICIES = (OPTIMIZER, "firstfit", "bestfit", "fgd", "tas", "leastallocated")


def _chooser_policy(name: str) -> Callable[[Baseline], Placement]:
    def run(baseline: Baseline) -> Placement:
        shapes = counted_shapes(pending_requests(baseline.snapshot)) if name == "fgd" else []
        return greedy_placement(baseline.snapshot, make_chooser(name, shapes), baseline=baseline)

    return run


def _tas_policy(baseline: Baseline) -> Placement:
    return tas_placement(baseline.snapshot, baseline)


_BASELINES: dict[str, Callable[[Baseline], Placement]] = {
    "firstfit": _chooser_policy("firstfit"),
    "bestfit": _chooser_policy("bestfit"),
    "fgd": _chooser_policy("fgd"),
    "leastallocated": _chooser_policy("leastallocated"),
    "tas": _tas_policy,
}


def policy_name(name: str) -> str:
    """The canonical name of a policy (``Best-Fit`` -> ``bestfit``); an unknown one is bad input."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    if key not in POLICIES:
        raise InputError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}", field="policy")
    return key


def effective_snapshot(snapshot: Snapshot, settings: Settings | None) -> Snapshot:
    """The snapshot as planned under ``settings``.

    The topology level override is applied, and without ExtendedResourceToleration
    emulation the pods keep only the tolerations their templates and flavors give.
    """
    update: dict[str, object] = {}
    if settings is not None and settings.topology_levels:
        update["default_topology_levels"] = tuple(settings.topology_levels)
    if settings is not None and not settings.extended_resource_toleration:
        update["workloads"] = tuple(_without_admission_tolerations(w) for w in snapshot.workloads)
    planned = snapshot.model_copy(update=update) if update else snapshot
    if settings is not None and not settings.modules.mig.enabled:
        planned = layouts_kept(planned, "MIG layout planning is switched off (settings.modules.mig)")
    return planned


def layouts_kept(
    snapshot: Snapshot, why: str, *, except_: frozenset[tuple[str, int]] = frozenset()
) -> Snapshot:
    """The snapshot with every MIG GPU (but those in ``except_``) held as it is: no new layout for it."""
    if not any(g.hold == "" for n in snapshot.nodes for g in n.mig_gpus):
        return snapshot

    def held(node: Node) -> Node:
        gpus = tuple(g if (node.name, g.index) in except_ else g.held(why) for g in node.mig_gpus)
        return node.model_copy(update={"mig_gpus": gpus})

    nodes = tuple(held(n) if n.mig_gpus else n for n in snapshot.nodes)
    return snapshot.model_copy(update={"nodes": nodes})


def _changeable(snapshot: Snapshot, settings: Settings | None) -> Snapshot:
    """Only the most useful MIG GPUs may change (``settings.mig_changeable_gpus``)."""
    limit = (settings or Settings()).mig_changeable_gpus
    if sum(1 for n in snapshot.nodes for g in n.mig_gpus if not g.hold) <= limit:
        return snapshot
    why = f"not among the {limit} MIG GPUs this plan may change (settings.migChangeableGpus)"
    return layouts_kept(snapshot, why, except_=frozenset(most_useful(snapshot, limit)))


def _without_admission_tolerations(workload: Workload) -> Workload:
    if not any(ps.admission_tolerations for ps in workload.pod_sets):
        return workload
    pod_sets = tuple(ps.model_copy(update={"admission_tolerations": ()}) for ps in workload.pod_sets)
    return workload.model_copy(update={"pod_sets": pod_sets})


def plan(
    snapshot: Snapshot,
    settings: Settings | None = None,
    policy: str = OPTIMIZER,
    *,
    previous: Plan | None = None,
    check: bool = True,
) -> Plan:
    """Plan ``snapshot`` with the named policy (see :data:`POLICIES`).

    With ``check`` (the default) the plan has passed ``check_plan``; a violation
    raises :class:`~optsched.errors.PlanValidationError`, because an invalid
    plan is a bug and must never be shown or applied. ``check=False`` is for
    callers that report violations themselves (the side-by-side comparison and
    the benchmarks, which count invalid plans). ``previous`` is the plan of the
    last cycle, which the optimizer's stability stage keeps close to.
    """
    key = policy_name(policy)
    planned = effective_snapshot(snapshot, settings)
    if key != OPTIMIZER:
        planned = layouts_kept(planned, f"the {key} policy keeps MIG layouts as they are")
    else:
        planned = _changeable(planned, settings)
    base = Baseline.of(planned)
    result = _optimize(base, settings, previous) if key == OPTIMIZER else _baseline(key, base)
    if check:
        assert_valid(planned, result)
    return result


def _optimize(base: Baseline, settings: Settings | None, previous: Plan | None) -> Plan:
    solved = solve(base.snapshot, settings, previous, baseline=base)
    built_at = time.perf_counter()
    planned = build_plan(
        base.snapshot,
        solved.placement,
        status=solved.status,
        policy=OPTIMIZER,
        solve_seconds=solved.seconds,
        objective=solved.objective,
        bound=solved.bound,
        gap=solved.gap,
        warnings=list(solved.warnings),
        beyond_window=solved.beyond_window,
        baseline=base,
    )
    if not solved.log:
        return planned
    log = [*solved.log, f"plan (summary, reasons) built in {time.perf_counter() - built_at:.2f}s"]
    return planned.model_copy(update={"solver_log": log})


def _baseline(key: str, base: Baseline) -> Plan:
    started = time.perf_counter()
    placement = _BASELINES[key](base)
    seconds = time.perf_counter() - started
    status = PlanStatus.HEURISTIC if base.snapshot.workloads else PlanStatus.EMPTY
    return build_plan(
        base.snapshot, placement, status=status, policy=key, solve_seconds=round(seconds, 4), baseline=base
    )
