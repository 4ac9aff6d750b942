"""Requests no node of the cluster could ever hold: bad input, reported before planning."""

from __future__ import annotations

from optsched.model.snapshot import Snapshot


def impossible_requests(snapshot: Snapshot) -> list[str]:
    """PodSets whose single pod exceeds what any node has at all: bad input, not a deferral."""
    if not snapshot.nodes:
        return []
    max_gpus = max(len(n.healthy_gpus) for n in snapshot.nodes)
    max_cpu = max(n.cpu_milli for n in snapshot.nodes)
    max_mem = max(n.memory_mib for n in snapshot.nodes)
    problems = []
    for workload in snapshot.workloads:
        for number, pod_set in enumerate(workload.pod_sets):
            req = pod_set.request
            field = f"spec.podSets[{number}] ({pod_set.name})"
            if req.gpus > max_gpus:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.gpus} GPUs per pod; "
                    f"the largest node has {max_gpus}"
                )
            if req.cpu_milli > max_cpu:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.cpu_milli}m CPU per pod; "
                    f"the largest node has {max_cpu}m"
                )
            if req.memory_mib > max_mem:
                problems.append(
                    f"Workload {workload.key}: {field} asks for {req.memory_mib}Mi memory per pod; "
                    f"the largest node has {max_mem}Mi"
                )
    return problems
