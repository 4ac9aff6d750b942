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
only restricted to their reserved flavor (done in node filtering).

Each PodSet uses exactly one flavor: where its candidates span several
flavors, a Boolean per flavor selects one.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from optsched.kueue.quota import QuotaLedger, pod_quota_amounts, quota_of
from optsched.solver.context import HintRule, HintView, ObjectiveTerm, PodSetEntry, SolverContext


def _flavor_hint(ys: list[cp_model.IntVar], ps: PodSetEntry, first: bool) -> HintRule:
    """The flavor the known placement uses (the first one where it places nothing)."""

    def rule(h: HintView) -> int:
        if any(h(y) for y in ys):
            return 1
        if not h(ps.workload.admit) or any(h(y) for y in ps.y):
            return 0
        return int(first)

    return rule


class Quota:
    phase = "admission"
    name = "quota"

    def apply(self, ctx: SolverContext) -> list[ObjectiveTerm]:
        model = ctx.model
        # One flavor per PodSet (hard: a plan names one flavor per PodSet).
        for ps in ctx.pod_sets:
            if len(set(ps.flavors)) < 2:
                continue
            names = sorted(set(ps.flavors), key=lambda f: (f is None, f or ""))
            pick = {f: model.new_bool_var(f"flavor[{ps.index},{f}]") for f in names}
            model.add(sum(pick.values(), start=0) == ps.workload.admit)
            for pos, f in enumerate(ps.flavors):
                model.add(ps.y[pos] <= ps.ub[pos] * pick[f])
            for f, var in pick.items():
                ys = [ps.y[pos] for pos, g in enumerate(ps.flavors) if g == f]
                ctx.derive(var, _flavor_hint(ys, ps, f == names[0]))
        if not ctx.settings.modules.quota.enabled:
            return []
        queues = {cq.name: cq for cq in ctx.snapshot.cluster_queues}
        demand: dict[tuple[str, str, str], tuple[list[cp_model.IntVar], list[int]]] = {}
        for ps in ctx.pod_sets:
            cq_name = ps.workload.cluster_queue
            if cq_name is None or cq_name not in queues:
                continue
            amounts = pod_quota_amounts(ps.request)
            for pos, flavor in enumerate(ps.flavors):
                if flavor is None:
                    continue
                for resource, amount in amounts.items():
                    if amount <= 0 or quota_of(queues[cq_name], flavor, resource) is None:
                        continue
                    variables, coefs = demand.setdefault((cq_name, flavor, resource), ([], []))
                    variables.append(ps.y[pos])
                    coefs.append(amount)
        if not demand:
            return []
        ledger = QuotaLedger.from_snapshot(ctx.snapshot)
        used: dict[tuple[str, str, str], cp_model.LinearExpr] = {}
        for key, (variables, coefs) in demand.items():
            base = ledger.used.get(key, 0)
            used[key] = cp_model.LinearExpr.weighted_sum([*variables, 1], [*coefs, base])
        cohorts: set[tuple[str, str, str]] = set()
        for (cq_name, flavor, resource), expr in used.items():
            cq = queues[cq_name]
            quota = quota_of(cq, flavor, resource)
            assert quota is not None
            if cq.cohort is None:
                model.add(expr <= quota.nominal)
                continue
            if quota.borrowing_limit is not None:
                model.add(expr <= quota.nominal + quota.borrowing_limit)
            cohorts.add((cq.cohort, flavor, resource))
        for cohort, flavor, resource in sorted(cohorts):
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

                def over_hint(
                    h: HintView,
                    v: list[cp_model.IntVar] = variables,
                    c: list[int] = coefs,
                    b: int = base,
                    n: int = nominal,
                ) -> int:
                    return max(0, b + h.linear(v, c) - n)

                def lend_hint(
                    h: HintView,
                    v: list[cp_model.IntVar] = variables,
                    c: list[int] = coefs,
                    b: int = base,
                    n: int = nominal,
                    cap: int = max(0, lendable),
                ) -> int:
                    return max(0, min(cap, n - b - h.linear(v, c)))

                ctx.derive(over, over_hint)
                ctx.derive(lend, lend_hint)
            floor = min(0, ledger.cohort_slack(cohort, flavor, resource))
            model.add(sum(slack, start=0) >= floor)
        return []
