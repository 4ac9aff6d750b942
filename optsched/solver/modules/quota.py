"""Kueue quota for workloads that do not yet hold a reservation.

Per ClusterQueue, flavor and covered resource, what newly admitted pods take
is added to the queue's usage. Without a cohort the queue stays within its
nominal quota. In a cohort it stays within nominal plus its borrowing limit,
and the cohort's slack -- the sum over members of unused lendable quota
(``min(lendingLimit, nominal - usage)``, at least 0) minus borrowing
(``usage - nominal``, at least 0) -- stays at or above where the snapshot had it
(0, or lower if the cohort was already over-committed). This is the rule the
greedy baselines apply (``optsched.kueue.quota``), so a greedy plan is always
feasible here. Workloads with a reservation already hold their quota and are
only restricted to their reserved flavor (done in candidate filtering). Which
flavor a PodSet uses is :mod:`optsched.solver.modules.flavor`'s.
"""

from __future__ import annotations

from functools import partial

from ortools.sat.python import cp_model

from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, quota_of
from optsched.model.snapshot import ClusterQueue
from optsched.solver.context import ModelContext, Switch
from optsched.solver.hints import HintView
from optsched.solver.objective import ObjectiveTerm, Phase, Stage

Key = tuple[str, str, str]
"""(ClusterQueue, flavor, resource)."""
Demand = dict[Key, tuple[list[cp_model.IntVar], list[int]]]
"""Key -> the count variables that take quota there and the amount each pod takes."""


class Quota:
    name = "quota"
    phase = Phase.ADMISSION
    switch = Switch("quota")
    stages: tuple[Stage, ...] = ()

    def apply(self, ctx: ModelContext, weight: int) -> list[ObjectiveTerm]:
        queues = {cq.name: cq for cq in ctx.snapshot.cluster_queues}
        demand = _demand(ctx, queues)
        if not demand:
            return []
        ledger = ctx.problem.ledger
        used: dict[Key, cp_model.LinearExpr] = {}
        for key, (variables, coefs) in demand.items():
            base = ledger.used.get(key, 0)
            used[key] = cp_model.LinearExpr.weighted_sum([*variables, 1], [*coefs, base])
        for cohort, flavor, resource in _queue_limits(ctx.model, queues, used, ledger):
            _cohort_slack(ctx, ledger, (cohort, flavor, resource), used, demand)
        return []


def _demand(ctx: ModelContext, queues: dict[str, ClusterQueue]) -> Demand:
    demand: Demand = {}
    for ps in ctx.vars.pod_sets:
        cq_name = ps.owner.cluster_queue
        if cq_name is None or cq_name not in queues:
            continue
        amounts = pod_quota_amounts(ps.request)
        for c in ps.candidates:
            if c.flavor is None:
                continue
            for resource, amount in amounts.items():
                if amount <= 0 or quota_of(queues[cq_name], c.flavor, resource) is None:
                    continue
                variables, coefs = demand.setdefault((cq_name, c.flavor, resource), ([], []))
                variables.append(c.y)
                coefs.append(amount)
    return demand


def _queue_limits(
    model: cp_model.CpModel,
    queues: dict[str, ClusterQueue],
    used: dict[Key, cp_model.LinearExpr],
    ledger: QuotaLedger,
) -> list[Key]:
    """Each queue within nominal (no cohort) or nominal plus borrowing; returns the cohorts touched.

    A queue the snapshot already shows over its limit (its quota was lowered after
    admissions) takes nothing more: the limit is then what it uses, not less.
    """
    cohorts: set[Key] = set()
    for key, expr in used.items():
        cq_name, flavor, resource = key
        cq = queues[cq_name]
        quota = quota_of(cq, flavor, resource)
        assert quota is not None
        base = ledger.used.get(key, 0)
        if cq.cohort is None:
            model.add(expr <= max(quota.nominal, base))
            continue
        if quota.borrowing_limit is not None:
            model.add(expr <= max(quota.nominal + quota.borrowing_limit, base))
        cohorts.add((cq.cohort, flavor, resource))
    return sorted(cohorts)


def _cohort_slack(
    ctx: ModelContext, ledger: QuotaLedger, where: Key, used: dict[Key, cp_model.LinearExpr], demand: Demand
) -> None:
    """The cohort's lendable quota minus borrowing stays at or above the snapshot's.

    ``where`` is (cohort, flavor, resource).
    """
    model = ctx.model
    cohort, flavor, resource = where
    slack: list[cp_model.LinearExprT] = []
    for member in ledger.members(cohort):
        quota = quota_of(member, flavor, resource)
        if quota is None:
            continue
        key = (member.name, flavor, resource)
        lendable = quota.lending_limit if quota.lending_limit is not None else quota.nominal
        if key not in used:
            u = ledger.used.get(key, 0)
            slack.append(max(0, min(lendable, quota.nominal - u)) - max(0, u - quota.nominal))
            continue
        lend = model.new_int_var(0, max(0, lendable), f"lend[{member.name},{flavor},{resource}]")
        over = model.new_int_var(0, 1 << 40, f"over[{member.name},{flavor},{resource}]")
        model.add(over - used[key] >= -quota.nominal)
        model.add(lend + used[key] - over <= quota.nominal)
        slack.append(lend - over)
        variables, coefs = demand[key]
        base, nominal = ledger.used.get(key, 0), quota.nominal
        ctx.derive(over, partial(_over, variables=variables, coefs=coefs, base=base, nominal=nominal))
        ctx.derive(
            lend,
            partial(
                _lend, variables=variables, coefs=coefs, base=base, nominal=nominal, cap=max(0, lendable)
            ),
        )
    floor = min(0, ledger.cohort_slack(cohort, flavor, resource))
    model.add(sum(slack, start=0) >= floor)


def _over(h: HintView, variables: list[cp_model.IntVar], coefs: list[int], base: int, nominal: int) -> int:
    """Hint: what the member uses beyond its nominal quota."""
    return max(0, base + h.linear(variables, coefs) - nominal)


def _lend(
    h: HintView, variables: list[cp_model.IntVar], coefs: list[int], base: int, nominal: int, cap: int
) -> int:
    """Hint: the member's unused nominal quota, up to its lending limit."""
    return max(0, min(cap, nominal - base - h.linear(variables, coefs)))
