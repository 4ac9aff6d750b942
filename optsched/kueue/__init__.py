"""Kueue's semantics, as optsched relies on them: Workload state and ClusterQueue quota.

* :mod:`~optsched.kueue.workload_status`: what a raw Workload's status says
  (reserved, admitted, finished, our admission check's state);
* :mod:`~optsched.kueue.quota`: nominal quota, cohort borrowing and lending,
  as a ledger the greedy baselines, the solver and the deferral reasons share.

Parsing Kueue objects into the snapshot lives in :mod:`optsched.snapshot`;
the API group and versions in :mod:`optsched.model.names`.
"""
