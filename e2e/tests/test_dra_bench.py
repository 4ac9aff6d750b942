"""Benchmark: what DRA enforcement costs from Ready to bound, against node pins only (prints figures).

Skipped unless ``OPTSCHED_E2E_BENCH=1``; meant for the ``large-dra`` profile (the 1,000 nodes of
``large``, every GPU node a DRA node whose ResourceSlice the simulated agent publishes)::

    OPTSCHED_E2E_STATE=/tmp/optsched-e2e-large python -m e2e.cluster up --profile large-dra
    OPTSCHED_E2E_PROFILE=large-dra OPTSCHED_E2E_STATE=/tmp/optsched-e2e-large OPTSCHED_E2E_KEEP=1 \\
        OPTSCHED_E2E_BENCH=1 OPTSCHED_E2E_TIMEOUT=900 python -m pytest e2e/tests/test_dra_bench.py -s

The queue is the controller benchmark's (seeded), submitted at once into an empty cluster, twice,
side by side in one run: first with ``--no-dra-claims`` (pods pinned to their node only; their
``nvidia.com/gpu`` is served by the DeviceClass's extended resource, kube-scheduler choosing the
devices), then with a ResourceClaim per pod selecting the planned GPUs. For every workload:
Kueue's ``Admitted`` transition (all checks Ready) to its last pod's ``PodScheduled``, both server
timestamps (whole seconds). Reported: median, p90 and mean of that, their ratio, pods and GPUs
bound, claims optsched created, the controller's peak RSS. Asserted: every claim optsched created
was allocated exactly its pod's planned devices, and the node-pin run made none; the 20% target is
printed, not asserted (the machine is shared: time ratios are noisy).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.agent_helpers import PROFILE_LABEL, AgentProcess, running_agent
from e2e.optsched_helpers import optsched_queue, wait_namespace_gone, webhook_controller
from e2e.testing import KUEUE_API, E2ECluster, Namespace
from e2e.tests.test_controller_bench import SOLVER_SECONDS, peak_rss_mib, percentile, run_burst, workloads
from optsched.agent.resource_slices import SIMULATED_DRA_LABEL
from optsched.kueue import workload_status as ks

pytestmark = pytest.mark.skipif(
    os.environ.get("OPTSCHED_E2E_BENCH") != "1", reason="benchmark: OPTSCHED_E2E_BENCH=1"
)

RESOURCE_API = "resource.k8s.io/v1"


@pytest.fixture(scope="module")
def agent(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    with running_agent(
        cluster,
        tmp_path_factory.mktemp("agent-state"),
        "--interval",
        "5",
        # Counted once the nodes carry their hardware profile (labelled as the agent starts).
        ready=lambda c, _: _slices(c) >= _served_dra_nodes(c) or None,
        what="a ResourceSlice for every DRA node a hardware profile models",
        timeout=900,
    ) as proc:
        yield proc


def _served_dra_nodes(cluster: E2ECluster) -> int:
    """DRA nodes a shipped hardware profile models: the simulated agent publishes a slice for each."""
    labels = [n["metadata"].get("labels") or {} for n in cluster.list("v1", "Node")]
    return sum(1 for lb in labels if lb.get(SIMULATED_DRA_LABEL) == "true" and lb.get(PROFILE_LABEL))


def _slices(cluster: E2ECluster) -> int:
    return len(cluster.list(RESOURCE_API, "ResourceSlice"))


def _scheduled_at(pod: dict[str, Any]) -> float | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            at = ks.parse_time(cond.get("lastTransitionTime"))
            return at.timestamp() if at else None
    return None


def ready_to_bound(cluster: E2ECluster, ns: Namespace) -> list[float]:
    """Per admitted workload whose pods all bound: seconds from Admitted to its last pod scheduled."""
    last: dict[str, float] = {}
    waiting: set[str] = set()
    for pod in cluster.list("v1", "Pod", ns.name):
        owner = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name", "")
        at = _scheduled_at(pod)
        if at is None:
            waiting.add(owner)
        else:
            last[owner] = max(last.get(owner, 0.0), at)
    out = []
    for wl in cluster.list(KUEUE_API, "Workload", ns.name):
        admitted = ks.condition(wl, "Admitted")
        job = next((r["name"] for r in wl["metadata"].get("ownerReferences") or [] if r["kind"] == "Job"), "")
        since = ks.parse_time(admitted.get("lastTransitionTime")) if admitted else None
        done = job in last and job not in waiting
        if since is not None and admitted and admitted.get("status") == "True" and done:
            out.append(last[job] - since.timestamp())
    return out


def claims_match_plans(cluster: E2ECluster, ns: Namespace) -> tuple[int, int]:
    """(optsched claims, of them allocated exactly the UUIDs their pod was planned)."""
    uuids: dict[str, set[str]] = {}
    slices = cluster.list(RESOURCE_API, "ResourceSlice")
    for s in slices:
        for d in s["spec"].get("devices") or []:
            uuids[f"{s['spec']['pool']['name']}/{d['name']}"] = {d["attributes"]["uuid"]["string"]}
    planned = {
        p["metadata"]["name"]: set(
            (p["metadata"].get("annotations") or {}).get("optsched.io/gpu-uuids", "").split(",")
        )
        for p in cluster.list("v1", "Pod", ns.name)
    }
    ours = exact = 0
    for claim in cluster.list(RESOURCE_API, "ResourceClaim", ns.name):
        if not claim["metadata"]["name"].startswith("optsched-"):
            continue
        ours += 1
        owner = next((r["name"] for r in claim["metadata"].get("ownerReferences") or []), "")
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get(
            "results"
        ) or []
        got = set().union(*(uuids.get(f"{r['pool']}/{r['device']}", set()) for r in results))
        exact += int(bool(results) and got == planned.get(owner))
    return ours, exact


def one_run(cluster: E2ECluster, name: str, *flags: str) -> dict[str, Any]:
    ns = Namespace(cluster, name)
    proc, check = webhook_controller(
        cluster, ns, "--interval", "5", "--debounce", "2", "--time-limit", SOLVER_SECONDS, *flags
    )
    proc.start()
    try:
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=120)
        optsched_queue(ns, check, gpus=100000)
        gpus, pods, seconds = run_burst(cluster, ns, workloads("optsched.io/required-topology"))
        latency = ready_to_bound(cluster, ns)
        claims = claims_match_plans(cluster, ns)
        memory = peak_rss_mib(proc.proc.pid) if proc.proc else 0.0
    finally:
        proc.stop()
        ns.cleanup()
    wait_namespace_gone(cluster, ns.name, timeout=900)
    return {
        "gpus": gpus,
        "pods": pods,
        "seconds": seconds,
        "latency": latency,
        "claims": claims,
        "rss": memory,
    }


def _line(label: str, run: dict[str, Any]) -> str:
    lat = run["latency"]
    return (
        f"{label}: {run['gpus']} GPUs / {run['pods']} pods bound in {run['seconds']:.0f}s; "
        f"Ready->bound over {len(lat)} workloads: median {statistics.median(lat):.1f}s, "
        f"p90 {percentile(lat, 0.9):.1f}s, mean {statistics.fmean(lat):.2f}s; "
        f"optsched claims {run['claims'][0]} ({run['claims'][1]} allocated exactly as planned); "
        f"controller peak RSS {run['rss']:.0f} MiB"
    )


def test_dra_claims_against_node_pins_only(cluster: E2ECluster, agent: AgentProcess) -> None:
    pinned = one_run(cluster, "e2e-bench-pin", "--no-dra-claims")
    claimed = one_run(cluster, "e2e-bench-dra")
    ratio_median = statistics.median(claimed["latency"]) / max(statistics.median(pinned["latency"]), 1e-9)
    ratio_mean = statistics.fmean(claimed["latency"]) / max(statistics.fmean(pinned["latency"]), 1e-9)
    print(
        f"\n{_line('node pins only', pinned)}\n{_line('DRA claims', claimed)}\n"
        f"ratio DRA / node pins: median {ratio_median:.2f}, mean {ratio_mean:.2f} (target <= 1.20)"
    )
    assert pinned["latency"] and claimed["latency"]
    assert pinned["claims"][0] == 0
    assert claimed["claims"][0] == claimed["claims"][1] > 0
