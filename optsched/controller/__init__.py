"""optsched in the cluster: a Kueue AdmissionCheck controller that applies solved plans.

Pure modules compute what to write, from values: ``views`` (Workloads and
pods parsed once), ``inputs`` (the planning input), ``decide`` (every write
of a cycle, as one value), ``pinning``, ``records``, ``webhook.mutate``,
``leader.next_lease`` and ``admission_check.plan_checks``; an import contract
keeps the first group away from the API client. The I/O modules send those
writes through ``optsched.kube``: ``loop`` (the cycle), ``act`` (its only
writing phase), ``watch``, ``admission_check``, ``leader`` and ``replica``
(one process, wired together).
"""
