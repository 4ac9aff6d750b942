"""When each fault strikes: a seeded timeline that covers every fault class even in a short run.

The first round puts every class once, in a seeded order, at evenly spaced
moments (with jitter) between the warm-up and 80% of the run, so a 3-minute
soak meets all of them; after that, faults of random classes arrive at
exponentially distributed gaps until the end. The same seed and length give
the same timeline; what each fault hits (which node, which replica) is drawn
when it runs, from its own seeded generator, because it depends on the
cluster at that moment.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass


class FaultKind(enum.StrEnum):
    CONTROLLER_KILL = "controller-kill"
    """SIGKILL the leading replica at a random moment; restart it after a short delay."""
    REPLICA_FIGHT = "replica-fight"
    """Start a second replica; both contend for the Lease; later SIGKILL either."""
    APISERVER_RESTART = "apiserver-restart"
    API_CONFLICT = "api-409"
    """The proxy answers some writes 409 Conflict."""
    API_THROTTLE = "api-429"
    """The proxy answers some requests 429 with Retry-After."""
    API_ERROR = "api-500"
    API_HANG = "api-hang"
    """The proxy holds some requests without an answer, then drops them."""
    API_DROP = "api-drop"
    """The proxy closes some connections without an answer and cuts watch streams."""
    NODE_DELETE = "node-delete"
    NODE_NOT_READY = "node-notready"
    GPU_UNHEALTHY = "gpu-unhealthy"
    PREEMPTION = "preemption"
    """A high-priority workload arrives in a full ClusterQueue, so Kueue preempts."""


PROXY_KINDS = frozenset(
    {
        FaultKind.API_CONFLICT,
        FaultKind.API_THROTTLE,
        FaultKind.API_ERROR,
        FaultKind.API_HANG,
        FaultKind.API_DROP,
    }
)


@dataclass(frozen=True)
class ScheduledFault:
    at: float
    """Seconds after the soak started."""
    kind: FaultKind
    seed: int
    """Seeds the generator that picks this fault's target and durations."""


def fault_schedule(
    seed: int,
    seconds: float,
    *,
    warmup: float = 15.0,
    mean_gap: float = 20.0,
    kinds: tuple[FaultKind, ...] = tuple(FaultKind),
) -> tuple[ScheduledFault, ...]:
    """Every class once in the first round, then random classes; ordered by time, all inside the run."""
    if seconds <= 0 or not kinds:
        return ()
    rng = random.Random(f"faults:{seed}")
    warmup = min(warmup, seconds * 0.1)
    first_end = max(warmup, seconds * 0.8)
    order = list(kinds)
    rng.shuffle(order)
    step = (first_end - warmup) / len(order)
    times = [warmup + step * (i + rng.uniform(0.1, 0.9)) for i in range(len(order))]
    out = [ScheduledFault(t, kind, rng.randrange(2**31)) for t, kind in zip(times, order, strict=True)]
    t = first_end
    while True:
        t += rng.expovariate(1.0 / mean_gap)
        if t >= seconds:
            break
        out.append(ScheduledFault(t, rng.choice(order), rng.randrange(2**31)))
    return tuple(sorted(out, key=lambda f: f.at))
