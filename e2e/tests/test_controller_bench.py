"""Benchmark: a burst of workloads through Kueue TAS alone, then through optsched (prints figures).

Skipped unless ``OPTSCHED_E2E_BENCH=1``. On the 16-node small profile (the e2e default)::

    make e2e-up
    OPTSCHED_E2E_BENCH=1 .venv/bin/python -m pytest -s e2e/tests/test_controller_bench.py
    make e2e-down

On the 1,000-node large profile (its own state directory, the same ports: the
small cluster must be down)::

    OPTSCHED_E2E_PROFILE=large OPTSCHED_E2E_STATE=/tmp/optsched-e2e-large OPTSCHED_E2E_BENCH=1 \\
        OPTSCHED_E2E_TIMEOUT=600 .venv/bin/python -m pytest -s e2e/tests/test_controller_bench.py

Both runs get the same workloads (seeded), submitted one after another as fast
as the API server takes them, into an empty cluster. A run ends when nothing has changed for
``OPTSCHED_E2E_BENCH_SETTLE`` seconds (30); its time runs from the first
submission to the last pod's PodScheduled time. Printed: GPUs and pods bound,
time, and where the time went: per stage (quota reserved, our check Ready,
admitted, pods created, pinned, bound) when the workloads reached it and the
step from the stage before, and the controller's cycles (count, p50/p99, the
time spent in each phase); peak memory (optsched only). The assertions are
the targets: optsched binds at least as many GPUs as TAS, in no more than
1.2x TAS's time. ``OPTSCHED_E2E_BENCH_TIME_LIMIT`` sets the solver budget per
cycle (default 5 s); the controller otherwise runs with its defaults.
"""

from __future__ import annotations

import os
import random
import re
import time
from typing import Any

import pytest

from e2e.bench_timeline import api_time, cycle_summary, cycles, percentile, stage_table, timelines
from e2e.kube import condition
from e2e.optsched_helpers import (
    gpus_of,
    optsched_queue,
    tas_queue,
    wait_namespace_gone,
    webhook_controller,
)
from e2e.testing import (
    GPU_PRODUCT,
    KUEUE_API,
    RACK_LABEL,
    E2ECluster,
    Namespace,
    gpu_job,
)

pytestmark = pytest.mark.skipif(
    os.environ.get("OPTSCHED_E2E_BENCH") != "1", reason="benchmark: OPTSCHED_E2E_BENCH=1"
)

WORKLOADS = int(os.environ.get("OPTSCHED_E2E_BENCH_WORKLOADS", "500"))
SETTLE = float(os.environ.get("OPTSCHED_E2E_BENCH_SETTLE", "30"))
LIMIT = float(os.environ.get("OPTSCHED_E2E_BENCH_LIMIT", "1500"))
SOLVER_SECONDS = os.environ.get("OPTSCHED_E2E_BENCH_TIME_LIMIT", "5")
SUBMIT_SECONDS: dict[str, float] = {}
"""How long each run's submission of every Job took (the API server and Kueue's webhooks answer each)."""
SUBMITTED: dict[str, float] = {}
"""Wall time each run's namespace got its workloads."""
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-PCIE-40GB")


def workloads(required: str, seed: int = 7) -> list[dict[str, Any]]:
    """Mixed sizes: single pods of 1-8 GPUs, 4-GPU pairs, and 8-GPU gangs (half of them rack-bound)."""
    rng = random.Random(seed)
    jobs = []
    for i in range(WORKLOADS):
        roll = rng.random()
        product = {GPU_PRODUCT: rng.choice(PRODUCTS)}
        if roll < 0.5:
            jobs.append(
                gpu_job(
                    f"single-{i}", "lq", pods=1, gpus_per_pod=rng.choice((1, 2, 4, 8)), node_selector=product
                )
            )
        elif roll < 0.75:
            jobs.append(
                gpu_job(f"pair-{i}", "lq", pods=rng.choice((2, 4)), gpus_per_pod=4, node_selector=product)
            )
        else:
            annotations = {required: RACK_LABEL} if rng.random() < 0.5 else {}
            jobs.append(
                gpu_job(
                    f"gang-{i}",
                    "lq",
                    pods=rng.choice((4, 6, 8)),
                    gpus_per_pod=8,
                    template_annotations=annotations,
                    node_selector=product,
                )
            )
    return jobs


def run_burst(cluster: E2ECluster, ns: Namespace, jobs: list[dict[str, Any]]) -> tuple[int, int, float]:
    """Submit all, one after another; wait until nothing changes for SETTLE s.

    Returns (GPUs bound, pods bound, seconds from the first submission to the last pod bound, by the
    pods' own PodScheduled times).
    """
    started = time.monotonic()
    SUBMITTED[ns.name] = time.time()
    for job in jobs:
        ns.apply_one(job)
    SUBMIT_SECONDS[ns.name] = time.time() - SUBMITTED[ns.name]
    last_change, last_bound, last_count = time.monotonic(), -1, -1
    while time.monotonic() - started < LIMIT:
        pods = cluster.list("v1", "Pod", ns.name)
        gpus = sum(gpus_of(p) for p in pods if p["spec"].get("nodeName"))
        if gpus != last_bound or len(pods) != last_count:
            last_change, last_bound, last_count = time.monotonic(), gpus, len(pods)
        elif time.monotonic() - last_change > SETTLE:
            break
        time.sleep(1)
    bound = [p for p in cluster.list("v1", "Pod", ns.name) if p["spec"].get("nodeName")]
    times = [api_time((condition(p, "PodScheduled") or {}).get("lastTransitionTime")) for p in bound]
    last = max((t for t in times if t is not None), default=SUBMITTED[ns.name])
    return sum(gpus_of(p) for p in bound), len(bound), last - SUBMITTED[ns.name]


def breakdown(cluster: E2ECluster, ns: Namespace, log: str = "") -> str:
    """Where the time went: per stage, when the workloads reached it (read before the namespace goes)."""
    lines = timelines(
        cluster.list(KUEUE_API, "Workload", ns.name),
        cluster.list("v1", "Pod", ns.name),
        log,
        SUBMITTED[ns.name],
    )
    return f"  submitted in {SUBMIT_SECONDS[ns.name]:.1f}s\n" + stage_table(lines)


def peak_rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            text = status.read()
    except OSError:
        return 0.0
    found = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(found.group(1)) / 1024 if found else 0.0


def test_burst_tas_then_optsched(cluster: E2ECluster, ns: Namespace) -> None:
    tas_ns = Namespace(cluster, "e2e-bench-tas")
    try:
        tas_queue(tas_ns, gpus=100000, cpu="1000000", memory="10000Ti")
        tas = run_burst(cluster, tas_ns, workloads("kueue.x-k8s.io/podset-required-topology"))
        tas_stages = breakdown(cluster, tas_ns)
        print(f"\nKueue TAS {tas[0]} GPUs / {tas[1]} pods bound in {tas[2]:.0f}s:\n{tas_stages}", flush=True)
    finally:
        tas_ns.cleanup()
    wait_namespace_gone(cluster, tas_ns.name, timeout=600)

    proc, check = webhook_controller(cluster, ns, "--time-limit", SOLVER_SECONDS)
    proc.start()
    try:
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=120)
        optsched_queue(ns, check, gpus=100000)
        ours = run_burst(cluster, ns, workloads("optsched.io/required-topology"))
        memory = peak_rss_mib(proc.proc.pid) if proc.proc else 0.0
        our_stages = breakdown(cluster, ns, proc.log())
    finally:
        proc.stop()
    found = cycles(proc.log())
    print(
        f"\nbench ({WORKLOADS} workloads): Kueue TAS {tas[0]} GPUs / {tas[1]} pods bound in {tas[2]:.0f}s; "
        f"optsched {ours[0]} GPUs / {ours[1]} pods bound in {ours[2]:.0f}s "
        f"(ratio {ours[2] / max(tas[2], 1e-9):.2f}); optsched cycles {len(found.seconds)}, "
        f"p50 {percentile(found.seconds, 0.5):.2f}s, p99 {percentile(found.seconds, 0.99):.2f}s, "
        f"peak RSS {memory:.0f} MiB\nKueue TAS, seconds after submission:\n{tas_stages}"
        f"\noptsched, seconds after submission:\n{our_stages}\n{cycle_summary(found)}"
    )
    assert ours[0] >= tas[0]
    assert ours[2] <= 1.2 * tas[2]
