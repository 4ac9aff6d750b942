"""optsched in the cluster: a Kueue AdmissionCheck controller that applies solved plans.

The package splits into pure modules that compute what to write (``decide``,
``assumed``, ``pinning``, ``webhook.mutate``, ``leader.next_lease``) and thin
I/O modules that read the cluster and send those writes (``loop``,
``optsched.kube.writer``). Only the I/O modules touch an API server, so the
decisions can be tested on plain dictionaries.
"""
