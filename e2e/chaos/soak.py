"""One soak run, start to end: set up, run the controller behind the proxy, stream, attack, inject, judge.

Threads: the *actions* thread submits the honest stream and the tenant's
attacks in time order; the *faults* thread injects the fault timeline and
owes the recoveries (and restarts a replica that exited by itself, as a
Deployment would, noting it); the *checker* thread judges every two seconds;
the tenant's gate-lifting watch runs in its own. After ``minutes`` the stream
and the faults stop, every fault is undone, and the checker goes on until
nothing waits any more or the drain time is up. Each thread has its own API
client. Everything installed is removed at the end, nodes are put back, and
the report is written whatever happened.
"""

from __future__ import annotations

import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from e2e.chaos.capacity import Demand
from e2e.chaos.checker import Checker
from e2e.chaos.environment import (
    SYSTEM_NS,
    Environment,
    controller_kubeconfig,
    policy_enforced,
    setup,
    teardown,
    wait_active,
)
from e2e.chaos.faults import FaultRunner
from e2e.chaos.liveness import Tracked
from e2e.chaos.proxy import FaultProxy, LoopThread
from e2e.chaos.relay import Relay
from e2e.chaos.replicas import Blackout, Replicas
from e2e.chaos.report import Report, Totals
from e2e.chaos.schedule import FaultKind, fault_schedule
from e2e.chaos.tenants import Tenant, attack_times
from e2e.chaos.workloads import Products, WorkloadSpec, manifest, stream
from e2e.kube import ApiError, Kube
from e2e.testing import GPU, E2ECluster, bearer_client


@dataclass(frozen=True)
class Options:
    kubeconfig: Path
    minutes: float
    seed: int
    run_dir: Path
    report: Path | None
    bound: float = 120.0
    drain: float = 150.0
    mean_gap: float = 5.0
    restart_apiserver: Callable[[float], float] | None = None
    cluster_problem: Callable[[], str | None] | None = None
    """What is wrong with the cluster after the soak (a component down), or None; local harness only."""

    @property
    def seconds(self) -> float:
        return self.minutes * 60


class Submitter:
    """Creates the stream's Jobs and Pods and remembers each as :class:`Tracked` by its uid."""

    def __init__(self, env: Environment, report: Report) -> None:
        self.env = env
        self.report = report
        self.tracked: dict[str, Tracked] = {}

    def submit(self, spec: WorkloadSpec, actor: str, kube: Kube) -> str | None:
        namespace = self.env.tenant if actor == "tenant" else self.env.team
        obj = manifest(spec, "lq")
        obj["metadata"]["namespace"] = namespace
        for _ in range(4):
            try:
                made = kube.create(obj)
            except ApiError as exc:
                if exc.status < 500 and exc.status != 429:
                    self.report.say(f"submit {namespace}/{spec.name} refused: {exc}")
                    return None
            except httpx.HTTPError:
                pass
            else:
                uid = made["metadata"]["uid"]
                self.tracked[uid] = Tracked(uid, f"{namespace}/{spec.name}", spec.kind, actor, spec.demand)
                shape = f"{spec.demand.pods}x{spec.demand.gpus} GPUs {spec.demand.product or 'any'}"
                self.report.workload(
                    f"{namespace}/{spec.name}", spec.kind, actor, f"{shape}, {spec.priority}"
                )
                return spec.name
            time.sleep(3)
        self.report.say(f"submit {namespace}/{spec.name} failed: the API server did not answer")
        return None


def products(env: Environment) -> Products:
    per_node: dict[str, int] = {}
    nodes: dict[str, int] = {}
    for node in env.nodes_before.values():
        product = (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.product")
        if product:
            gpus = int(node["status"]["capacity"].get(GPU, 0))
            per_node[product] = max(per_node.get(product, 0), gpus)
            nodes[product] = nodes.get(product, 0) + 1
    return Products(per_node, nodes)


def upstream(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    """The API server's address and a context trusting its CA, from the admin kubeconfig."""
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    ca = cluster.get("certificate-authority")
    ctx = ssl.create_default_context(cafile=str(kubeconfig.resolve().parent / ca) if ca else None)
    if cluster.get("certificate-authority-data"):
        import base64  # deferred: only inline CAs (kind) need decoding

        ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return str(cluster["server"]), ctx


def run(opts: Options, report: Report) -> Totals:
    server, verify = upstream(opts.kubeconfig)
    loop = LoopThread()
    relay, proxy = Relay(), FaultProxy(server, verify, opts.seed)
    cluster = E2ECluster(opts.kubeconfig, None, external=opts.restart_apiserver is None)
    try:
        loop.call(relay.start())
        loop.call(proxy.start())
        report.say(
            f"fault proxy on 127.0.0.1:{proxy.port} -> {server}; webhook relay on 127.0.0.1:{relay.port}"
        )
        env = setup(cluster, opts.run_dir, relay.port, int(opts.seconds + opts.drain + 3600))
        report.say(
            f"run {env.run}: namespaces {env.team}, {env.tenant}; check {env.check}; logs in {opts.run_dir}"
        )
        try:
            _soak(opts, report, env, proxy, relay)
        finally:
            problems = teardown(env)
            report.notes["teardownProblems"] = problems
            report.say("cleaned up" + (f"; problems: {problems}" if problems else ""))
        problem = opts.cluster_problem() if opts.cluster_problem else None
        if problem:
            raise RuntimeError(f"the e2e cluster is not healthy after the soak: {problem}")
    finally:
        loop.call(proxy.stop())
        loop.call(relay.stop())
        loop.close()
        cluster.close()
    return report.totals()


def _clients(opts: Options, n: int) -> list[E2ECluster]:
    return [E2ECluster(opts.kubeconfig, None, external=True) for _ in range(n)]


def _replicas(
    opts: Options, env: Environment, proxy: FaultProxy, relay: Relay, blackout: Blackout
) -> Replicas:
    kubeconfig = controller_kubeconfig(env, opts.run_dir / "controller.kubeconfig", proxy.port)
    args = ["--check-name", env.check, "--controller-name", env.controller_name, "--leader-elect"]
    args += [
        "--lease-namespace",
        SYSTEM_NS,
        "--lease-name",
        env.lease,
        "--webhook-cert-dir",
        str(env.webhook_dir),
    ]
    return Replicas(kubeconfig, args, opts.run_dir, relay, blackout)


@dataclass
class _Parts:
    """Everything one run's threads share; each thread has its own API client."""

    submitter: Submitter
    faults: FaultRunner
    checker: Checker
    tenant: Tenant
    started: float
    seconds: float

    @property
    def end(self) -> float:
        return self.started + self.seconds


def _parts(
    opts: Options,
    report: Report,
    env: Environment,
    proxy: FaultProxy,
    replicas: Replicas,
    own: list[E2ECluster],
    tenant: Kube,
) -> _Parts:
    submitter = Submitter(env, report)
    blackout = replicas.blackout
    faults = FaultRunner(
        env,
        own[0],
        replicas,
        proxy,
        blackout,
        report,
        lambda n: _preempt(submitter, own[0], n),
        opts.restart_apiserver,
    )
    started = time.monotonic()
    checker = Checker(
        env,
        own[1].kube,
        submitter.tracked,
        report,
        started=started,
        paused=blackout.total,
        deleted_nodes=lambda: faults.deleted_nodes,
        active_faults=faults.active,
        bound=opts.bound,
    )
    return _Parts(
        submitter, faults, checker, Tenant(env, tenant, report, submitter.submit), started, opts.seconds
    )


def _soak(opts: Options, report: Report, env: Environment, proxy: FaultProxy, relay: Relay) -> None:
    replicas = _replicas(opts, env, proxy, relay, Blackout())
    own = _clients(opts, 3)
    tenants = [bearer_client(env.cluster, env.tenant_token, "tenant") for _ in range(2)]
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        replicas.start()
        wait_active(env)
        report.notes["gatePolicyEnforced"] = policy_enforced(env, tenants[0])
        enforced = report.notes["gatePolicyEnforced"]
        report.say(f"controller {replicas.alive()} serving; gate policy enforced: {enforced}")
        parts = _parts(opts, report, env, proxy, replicas, own, tenants[0])
        threads = [
            threading.Thread(target=parts.checker.loop, args=(stop,), name="checker", daemon=True),
            threading.Thread(
                target=parts.tenant.lift_gates, args=(stop, tenants[1]), name="lift", daemon=True
            ),
        ]
        workers = [
            threading.Thread(target=_actions, args=(opts, env, own[2], parts), daemon=True),
            threading.Thread(target=_faults, args=(opts, parts, replicas), daemon=True),
        ]
        for thread in [*threads, *workers]:
            thread.start()
        _wait(report, parts, replicas)
        for thread in workers:
            thread.join()
        parts.faults.recover_all()
        if not replicas.alive():
            replicas.start("r1")
        _drain(opts, report, parts.checker)
        if parts.checker.errors:
            report.notes["checkerErrors"] = parts.checker.errors
            raise RuntimeError(
                f"the invariant checker failed {len(parts.checker.errors)} time(s); first:\n"
                f"{parts.checker.errors[0]}"
            )
        report.notes["preempted"] = sorted(parts.checker.liveness.preempted)
        report.say(f"Kueue preempted {len(parts.checker.liveness.preempted)} workload(s) of the soak")
    finally:
        stop.set()
        for thread in threads:
            thread.join(20)
        replicas.stop_all()
        report.notes.update(
            controllerLogs=replicas.log_paths(),
            controllerExits=replicas.exits,
            proxyRequests=dict(proxy.counts),
        )
        for client in own:
            client.close()
        for kube in tenants:
            kube.close()


def _preempt(submitter: Submitter, cluster: E2ECluster, pods: int) -> str:
    name = f"urgent-{len(submitter.tracked):03d}"
    spec = WorkloadSpec(name, "preemptor", Demand(pods, 1, mixed=True), "urgent", 30)
    submitter.submit(spec, "preemptor", cluster.kube)
    return name


def _actions(opts: Options, env: Environment, own: E2ECluster, parts: _Parts) -> None:
    rng = random.Random(f"actions:{opts.seed}")
    arrivals: list[tuple[float, WorkloadSpec | str]] = [
        (t, spec) for t, spec in stream(opts.seed, opts.seconds, products(env), opts.mean_gap)
    ]
    arrivals += attack_times(opts.seed, opts.seconds)
    for at, item in sorted(arrivals, key=lambda a: a[0]):
        while time.monotonic() < parts.started + at:
            time.sleep(0.1)
        if time.monotonic() >= parts.end:
            break
        if isinstance(item, WorkloadSpec):
            parts.submitter.submit(item, "honest", own.kube)
        else:
            parts.tenant.attack(item, rng)
        parts.tenant.cleanup()
    parts.tenant.cleanup(older_than=0)


def _faults(opts: Options, parts: _Parts, replicas: Replicas) -> None:
    kinds = tuple(k for k in FaultKind if k is not FaultKind.APISERVER_RESTART or opts.restart_apiserver)
    pending = list(fault_schedule(opts.seed, opts.seconds, kinds=kinds))
    faults = parts.faults
    while time.monotonic() < parts.end:
        for name, code in replicas.poll():
            faults.report.say(f"controller {name} exited by itself (exit code {code}); restarting it")
            replicas.start(name)
        if pending and time.monotonic() >= parts.started + pending[0].at:
            faults.inject(pending.pop(0))
        faults.tick()
        time.sleep(0.2)


def _wait(report: Report, parts: _Parts, replicas: Replicas) -> None:
    last = time.monotonic()
    while time.monotonic() < parts.end:
        time.sleep(1)
        if time.monotonic() - last >= 30:
            last = time.monotonic()
            extra = f"; replicas {replicas.alive()}, active faults {parts.faults.active() or '-'}"
            report.summary(parts.checker.liveness.phases(), extra)


def _drain(opts: Options, report: Report, checker: Checker) -> None:
    report.say(f"stream and faults stopped; draining for up to {opts.drain:.0f}s")
    deadline = time.monotonic() + opts.drain
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        time.sleep(2)
        quiet = quiet + 1 if checker.settled() else 0
    report.summary(checker.liveness.phases(), "; drained" if quiet >= 3 else "; drain time over")
