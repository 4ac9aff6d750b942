"""From a snapshot to the plan a person reads: the one entry point every caller uses.

:func:`~optsched.planning.planner.plan` runs a policy (the optimizer or a greedy
baseline) on a snapshot, turns its placement into a
:class:`~optsched.model.plan.Plan` with reasons and a summary
(:mod:`~optsched.planning.build`), and checks it with the independent
validator before anyone sees it.
"""

from optsched.planning.planner import OPTIMIZER, POLICIES, plan, policy_name

__all__ = ["OPTIMIZER", "POLICIES", "plan", "policy_name"]
