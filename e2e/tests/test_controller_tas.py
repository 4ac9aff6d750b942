"""Side by side: the same workload set through a Kueue TAS flavor and through optsched.

Both runs start from an empty cluster (the first run's namespace is deleted and
its pods gone before the second starts). Reported per run: GPUs admitted,
multi-GPU pods whose GPUs are guaranteed inside one NVLink island (optsched
records the indices it chose; TAS chooses none, so the device plugin decides
and no island is guaranteed), racks per gang, and time until every pod runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from e2e.optsched_helpers import (
    ControllerProcess,
    gpus_of,
    optsched_queue,
    pod_gpus,
    tas_queue,
    wait_namespace_gone,
    webhook_controller,
)
from e2e.testing import (
    KUEUE_API,
    RACK_LABEL,
    E2ECluster,
    Namespace,
    gpu_job,
)
from e2e.tests.test_controller import FAST, islands_of, nodes_by_name

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
OURS_REQUIRED = "optsched.io/required-topology"
OURS_PREFERRED = "optsched.io/preferred-topology"


def workload_set(required: str, preferred: str) -> list[tuple[dict[str, Any], int]]:
    jobs = [(gpu_job(f"pair-{i}", "lq", pods=1, gpus_per_pod=2), 1) for i in range(6)]
    jobs += [(gpu_job(f"quad-{i}", "lq", pods=1, gpus_per_pod=4), 1) for i in range(4)]
    jobs.append(
        (gpu_job("gang-pref", "lq", pods=4, gpus_per_pod=8, template_annotations={preferred: RACK_LABEL}), 4)
    )
    jobs.append(
        (gpu_job("gang-req", "lq", pods=2, gpus_per_pod=8, template_annotations={required: RACK_LABEL}), 2)
    )
    return jobs


@dataclass
class Outcome:
    gpus: int
    multi_gpu_pods: int
    """Multi-GPU pods on nodes where one NVLink island could hold them."""
    in_one_island: int
    racks_per_gang: float
    seconds: float

    def line(self, name: str) -> str:
        return (
            f"{name}: {self.gpus} GPUs admitted, {self.in_one_island}/{self.multi_gpu_pods} multi-GPU pods "
            f"(on nodes with an island large enough) guaranteed in one NVLink island, "
            f"{self.racks_per_gang:.2f} racks per gang, "
            f"all running after {self.seconds:.1f}s"
        )


def submit_and_measure(
    cluster: E2ECluster,
    ns: Namespace,
    jobs: list[tuple[dict[str, Any], int]],
    before_wait: Callable[[], object] | None = None,
) -> Outcome:
    started = time.monotonic()
    applied = [(ns.apply_one(job), n) for job, n in jobs]
    if before_wait is not None:
        for job, _ in applied:
            wl = cluster.wait_workload(job)
            cluster.wait_condition(
                KUEUE_API, "Workload", wl["metadata"]["name"], "QuotaReserved", namespace=ns.name
            )
        before_wait()
    pods_by_job = [cluster.wait_pods(job, n, phase="Running", timeout=240) for job, n in applied]
    seconds = time.monotonic() - started
    nodes = nodes_by_name(cluster)
    gpus = multi = island = 0
    gang_racks = []
    for pods in pods_by_job:
        gpus += sum(gpus_of(p) for p in pods)
        for pod in pods:
            if gpus_of(pod) < 2:
                continue
            islands = islands_of(nodes[pod["spec"]["nodeName"]])
            if gpus_of(pod) > max(len(i) for i in islands):
                continue
            multi += 1
            indices = pod_gpus(pod)
            if indices and any(set(indices) <= set(i) for i in islands):
                island += 1
        if len(pods) > 1:
            gang_racks.append(
                len({nodes[p["spec"]["nodeName"]]["metadata"]["labels"][RACK_LABEL] for p in pods})
            )
    return Outcome(gpus, multi, island, sum(gang_racks) / max(1, len(gang_racks)), seconds)


def test_optsched_admits_at_least_as_much_as_tas_and_places_better(
    cluster: E2ECluster, ns: Namespace
) -> None:
    tas_ns = Namespace(cluster, "e2e-sbs-tas")
    try:
        tas_queue(tas_ns, gpus=1000, cpu="5000")
        tas = submit_and_measure(cluster, tas_ns, workload_set(KUEUE_REQUIRED, KUEUE_PREFERRED))
    finally:
        tas_ns.cleanup()
    wait_namespace_gone(cluster, tas_ns.name)

    proc, check = webhook_controller(cluster, ns, *FAST)
    proc.start()
    try:
        cluster.wait_condition(KUEUE_API, "AdmissionCheck", check, "Active", timeout=60)
        optsched_queue(ns, check, gpus=1000)
    finally:
        proc.kill()  # a clean stop of the last replica would set the check inactive
    # The set arrives as one burst: the check stays Active, Kueue reserves quota for every
    # workload, and the controller (restarted) plans the burst jointly, as it does when a
    # burst lands within one cycle. TAS, placing one workload at a time, sees the same order.
    proc = ControllerProcess(cluster.kubeconfig, *proc.args)
    ours = submit_and_measure(
        cluster, ns, workload_set(OURS_REQUIRED, OURS_PREFERRED), before_wait=proc.start
    )
    proc.stop()
    print("\n" + tas.line("Kueue TAS") + "\n" + ours.line("optsched"))
    assert ours.gpus >= tas.gpus
    assert ours.in_one_island >= tas.in_one_island
    assert ours.in_one_island == ours.multi_gpu_pods
    assert ours.racks_per_gang <= tas.racks_per_gang
