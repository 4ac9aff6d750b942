"""A fault-injection soak of optsched on the real e2e control plane (``python -m e2e.chaos``).

It runs the controller as it is deployed (its own service account, the shipped
RBAC, admission policies and webhook), submits a seeded stream of mixed
workloads through Kueue, lets a tenant misbehave, and injects faults: the
controller SIGKILLed, two replicas fighting for the Lease, the API server
restarted, API errors between the controller and the API server (through
:mod:`e2e.chaos.proxy`), nodes deleted or NotReady, GPUs turning unhealthy,
Kueue preemption. An independent checker counts what must never happen:
over-commits and escapes (:mod:`e2e.chaos.invariants`, where O and E are
defined), stuck and lost workloads (:mod:`e2e.chaos.liveness`, S and L).
W counts the workloads the soak submitted that the API server accepted (the
honest stream, the preemption fault's gangs, the tenant's Jobs); F counts the
faults injected (a fault that found nothing to hit, or could not be made, is
not counted).

Modules: ``cli`` (flags, exit status), ``soak`` (one run), ``environment``
(what is installed), ``workloads`` (the stream), ``tenants`` (the attacks),
``schedule`` and ``faults`` (when and how faults strike), ``policy``,
``proxy`` and ``relay`` (the network in between), ``replicas`` (controller
processes), ``facts``, ``capacity``, ``invariants``, ``liveness`` and
``checker`` (the judge), ``report`` (what is printed and written).
"""
