"""Benchmark: a burst of workloads through Kueue TAS alone, then through optsched (prints figures).

Skipped unless ``OPTSCHED_E2E_BENCH=1``; meant for the large profile::

    OPTSCHED_E2E_STATE=/tmp/optsched-e2e-large python -m e2e.cluster up --profile large
    OPTSCHED_E2E_STATE=/tmp/optsched-e2e-large OPTSCHED_E2E_KEEP=1 OPTSCHED_E2E_BENCH=1 \\
        OPTSCHED_E2E_BENCH_WORKLOADS=500 python -m pytest e2e/tests/test_controller_bench.py -s

Both runs get the same workloads (seeded), submitted at once into an empty
cluster. A run ends when nothing has changed for ``settle`` seconds; its time
is the moment the last pod was bound. Reported: GPUs admitted and bound, time,
controller cycle duration p50/p99 and peak memory (optsched only). The
assertions are the issue's targets: optsched admits at least as many GPUs as
TAS, in no more than 1.5x TAS's time. ``OPTSCHED_E2E_BENCH_TIME_LIMIT`` sets the
solver budget per cycle (default 5 s).
"""

from __future__ import annotations

import os
import random
import re
import time
from typing import Any

import pytest

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
    """Submit all; wait until nothing changes for SETTLE s. Returns (GPUs bound, pods bound, seconds)."""
    started = time.monotonic()
    for job in jobs:
        ns.apply_one(job)
    last_change, last_bound, last_count = started, -1, -1
    while time.monotonic() - started < LIMIT:
        pods = cluster.list("v1", "Pod", ns.name)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        gpus = sum(gpus_of(p) for p in bound)
        if gpus != last_bound or len(pods) != last_count:
            last_change, last_bound, last_count = time.monotonic(), gpus, len(pods)
        elif time.monotonic() - last_change > SETTLE:
            break
        time.sleep(2)
    return (
        last_bound,
        len([p for p in cluster.list("v1", "Pod", ns.name) if p["spec"].get("nodeName")]),
        last_change - started,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


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
    finally:
        tas_ns.cleanup()
    wait_namespace_gone(cluster, tas_ns.name, timeout=600)

    proc, check = webhook_controller(
        cluster, ns, "--interval", "5", "--debounce", "2", "--time-limit", SOLVER_SECONDS
    )
    proc.start()
    try:
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=120)
        optsched_queue(ns, check, gpus=100000)
        ours = run_burst(cluster, ns, workloads("optsched.io/required-topology"))
        memory = peak_rss_mib(proc.proc.pid) if proc.proc else 0.0
    finally:
        proc.stop()
    cycles = [float(m) for m in re.findall(r"cycle took ([0-9.]+)s", proc.log())]
    print(
        f"\nbench ({WORKLOADS} workloads): Kueue TAS {tas[0]} GPUs / {tas[1]} pods bound in {tas[2]:.0f}s; "
        f"optsched {ours[0]} GPUs / {ours[1]} pods bound in {ours[2]:.0f}s "
        f"(ratio {ours[2] / max(tas[2], 1e-9):.2f}); optsched cycles {len(cycles)}, "
        f"p50 {percentile(cycles, 0.5):.2f}s, p99 {percentile(cycles, 0.99):.2f}s, peak RSS {memory:.0f} MiB"
    )
    assert ours[0] >= tas[0]
    assert ours[2] <= 1.5 * tas[2]
