"""The controller's knobs, each with its one default; the ``optsched run`` flags read these defaults.

The solver's own knobs (time limit, workers) are :class:`optsched.settings.Settings`
fields and keep their defaults there. Values only: nothing here reads the
environment or talks to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optsched.model.names import DEFAULT_CHECK_NAME, DEFAULT_CONTROLLER_NAME
from optsched.settings import Settings


@dataclass(frozen=True)
class DeferPolicy:
    """How long a deferred workload keeps its quota before it is sent back to the queue."""

    hold_seconds: int = 300
    """Seconds after the quota reservation a deferred workload keeps it (at the head of its queue)."""
    retry_after_seconds: int = 60
    """``requeueAfterSeconds`` of the first Retry that sends it back; doubled with each requeue."""
    max_retry_after_seconds: int = 3600
    """The backoff's ceiling."""
    unschedulable_seconds: int = 120
    """A pinned pod kube-scheduler cannot bind for this long gets its workload re-planned."""
    reject_impossible: bool = True
    """Reject (rather than requeue forever) a workload that can never fit, once its hold time is over."""
    orphan_claim_seconds: int = 60
    """An optsched ResourceClaim whose pod is gone is deleted once it is this old (a pod the informer has
    not delivered yet is not taken for gone)."""
    mig_start_seconds: int = 300
    """A MIG layout change the node agent has not started (``Applying``) this long after it was written
    is dropped and its workloads planned again (a GPU whose pods never leave cannot be changed)."""

    def retry_after(self, requeues: int) -> int:
        """Exponential backoff on Kueue's requeue count, like Kueue's own checks."""
        factor: int = 2 ** min(max(requeues, 0), 20)
        return min(self.max_retry_after_seconds, self.retry_after_seconds * factor)


@dataclass(frozen=True)
class Options:
    """How one controller replica cycles."""

    check_names: tuple[str, ...] = (DEFAULT_CHECK_NAME,)
    """AdmissionChecks served; each is created if missing (with ``create_check``)."""
    controller_name: str = DEFAULT_CONTROLLER_NAME
    """``spec.controllerName`` of our AdmissionChecks."""
    interval: float = 10.0
    """Seconds between cycles when no watch event arrives (a safety net: events drive the cycles)."""
    debounce: float = 1.0
    """The longest a stream of watch events delays the cycle the first of them woke."""
    quiet: float = 0.2
    """A woken cycle (or pin pass) starts once no new event has come for this many seconds, so a burst
    makes one pass and the pass starts as soon as the burst is over."""
    checks_every: float = 60.0
    """Seconds between AdmissionCheck reconciles when no AdmissionCheck event arrives."""
    dry_run: bool = False
    """Plan and log every write; send none."""
    create_check: bool = True
    policy: DeferPolicy = DeferPolicy()
    namespaces: tuple[str, ...] = ()
    """Plan only the queue of these namespaces (all when empty); nodes and pods are read whole."""
    concurrency: int = 16
    """Writes in flight at once (each workload's own writes stay in order)."""
    sync_timeout: float = 30.0
    """Seconds a read waits for the informers' first list before the cycle is skipped."""
    dra_claims: bool = True
    """On DRA nodes, the webhook moves each pinned pod's GPUs onto a ResourceClaim selecting its planned
    UUIDs. False: no pod gets a claim; pods there are node-pinned only, their ``nvidia.com/gpu`` served
    through the DeviceClass's ``extendedResourceName`` and their enforcement counted as ``none``."""


@dataclass(frozen=True)
class LeaseOptions:
    """The coordination.k8s.io Lease two replicas compete for."""

    namespace: str = "optsched-system"
    name: str = "optsched-leader"
    duration_s: int = 15
    """A holder that has not renewed for this long has lost the Lease."""

    @property
    def renew_every_s(self) -> float:
        """Three renewals per lease duration, so one failed renewal does not cost the Lease."""
        return max(1.0, self.duration_s / 3)


@dataclass(frozen=True)
class WebhookOptions:
    """The pod-gating webhook, and where its serving certificate comes from."""

    port: int = 0
    """0: no webhook."""
    cert_dir: str | None = None
    """A directory with ``tls.crt``/``tls.key`` (e.g. from cert-manager).

    Without it the replicas keep one certificate in ``secret`` and patch the ``caBundle``.
    """
    secret: str = "optsched-webhook-tls"
    service: str = "optsched-webhook"
    """The Service name the certificate is issued for."""
    config: str = "optsched-pod-gate"
    """The MutatingWebhookConfiguration whose ``caBundle`` is kept current."""
    namespace: str = LeaseOptions.namespace
    """Where the Secret and the Service live."""


@dataclass(frozen=True)
class MetricsOptions:
    """The ``/metrics`` and ``/healthz`` endpoint."""

    host: str = "0.0.0.0"
    port: int = 9464
    """0: no endpoint."""
    secure: bool = True
    """HTTPS, and each scrape authenticated (TokenReview) and authorized (SubjectAccessReview)."""
    cert_dir: str | None = None
    """``tls.crt``/``tls.key`` to serve with (e.g. the webhook's); without it one is made at start."""


@dataclass(frozen=True)
class Replica:
    """How one replica of the controller runs: everything ``optsched run`` is told, as one value."""

    identity: str
    """This replica's name in the Lease."""
    options: Options = Options()
    settings: Settings = field(default_factory=Settings)
    """The solver's settings for every plan."""
    lease: LeaseOptions | None = None
    """None: no leader election (this replica always acts)."""
    webhook: WebhookOptions = WebhookOptions()
    metrics: MetricsOptions = MetricsOptions()
    """The Prometheus and liveness endpoint."""
    request_timeout: float = 30.0
    """Seconds one API call may take, its answer included."""
    once: bool = False
    """One cycle, then exit."""
