"""The topology benchmark's inputs: a seeded modern GPU cluster and a seeded stream of jobs.

Both depend on the seed alone, so every policy of one seed meets the same
cluster and the same arrivals, and a run can be repeated exactly.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from optsched.model.names import DEFAULT_TOPOLOGY_LEVELS, HOSTNAME_LABEL, PRODUCT_LABEL
from optsched.model.snapshot import Node, PodRequest, PodSet, Workload

BLOCK, RACK = DEFAULT_TOPOLOGY_LEVELS[0], DEFAULT_TOPOLOGY_LEVELS[1]
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# (product, GPUs per node, NVLink islands, share of racks)
_KINDS = (
    ("NVIDIA-H100-80GB-HBM3", 8, ((0, 1, 2, 3, 4, 5, 6, 7),), 0.40),
    ("NVIDIA-H200", 8, ((0, 1, 2, 3, 4, 5, 6, 7),), 0.25),
    ("NVIDIA-A100-PCIE-40GB", 8, ((0, 1), (2, 3), (4, 5), (6, 7)), 0.25),
    ("NVIDIA-GB200", 4, ((0, 1, 2, 3),), 0.10),
)


def synthetic_cluster(nodes: int, seed: int) -> list[Node]:
    """Racks of one node kind each (NVL72 racks: 18 nodes), 4-8 racks per block."""
    rng = random.Random(seed)
    out: list[Node] = []
    block, racks_in_block, block_size = 0, 0, rng.randint(4, 8)
    weights = [k[3] for k in _KINDS]
    while len(out) < nodes:
        product, gpus, islands, _ = rng.choices(_KINDS, weights=weights)[0]
        size = 18 if product == "NVIDIA-GB200" else rng.randint(16, 32)
        size = min(size, nodes - len(out))
        rack = f"b{block}-r{racks_in_block}"
        for i in range(size):
            name = f"{rack}-n{i:02d}"
            out.append(
                Node(
                    name=name,
                    labels={PRODUCT_LABEL: product, BLOCK: f"b{block}", RACK: rack, HOSTNAME_LABEL: name},
                    cpu_milli=gpus * 16_000,
                    memory_mib=gpus * 131_072,
                    gpu_count=gpus,
                    gpu_product=product,
                    gpu_memory_mib=81_920,
                    nvlink_islands=islands,
                )
            )
        racks_in_block += 1
        if racks_in_block == block_size:
            block, racks_in_block, block_size = block + 1, 0, rng.randint(4, 8)
    return out


@dataclass(frozen=True)
class Job:
    """A job of the stream: when it arrives, how many cycles it runs, and its pods of ``gpus`` GPUs each."""

    name: str
    arrival: int
    duration: int
    pods: int
    gpus: int

    @property
    def total_gpus(self) -> int:
        return self.pods * self.gpus

    @property
    def is_gang(self) -> bool:
        return self.pods > 1


def generate_jobs(capacity_gpus: int, count: int, load: float, seed: int) -> list[Job]:
    """Jobs whose offered GPU load (arrival rate x GPUs x duration) is ``load`` x capacity.

    Gangs are capped at a quarter of the cluster so every job can eventually run.
    """
    rng = random.Random(seed)
    shapes: list[tuple[int, int]] = []
    for _ in range(count):
        if rng.random() < 0.7:
            shapes.append((1, rng.choices((1, 2, 4, 8), weights=(4, 3, 2, 2))[0]))
        else:
            gpus = rng.choice((4, 8))
            sizes = [p for p in (2, 4, 8, 16, 32, 64) if p * gpus <= capacity_gpus // 4] or [2]
            weights = [
                w for p, w in zip((2, 4, 8, 16, 32, 64), (8, 6, 4, 2, 1, 0.5), strict=True) if p in sizes
            ]
            shapes.append((rng.choices(sizes, weights=weights)[0], gpus))
    durations = [max(1, round(rng.lognormvariate(math.log(12), 0.6))) for _ in range(count)]
    work = sum(p * g * d for (p, g), d in zip(shapes, durations, strict=True))
    horizon = max(1, round(work / (load * capacity_gpus)))
    arrivals = sorted(rng.randrange(horizon) for _ in range(count))
    return [
        Job(f"job-{i:05d}", arrivals[i], durations[i], pods, gpus)
        for i, ((pods, gpus), _) in enumerate(zip(shapes, durations, strict=True))
    ]


def workload_of(job: Job) -> Workload:
    """The job as a Kueue workload; gangs prefer one rack, as a TAS user would ask."""
    request = PodRequest(cpu_milli=job.gpus * 8_000, memory_mib=job.gpus * 65_536, gpus=job.gpus)
    pod_set = PodSet(
        name="main",
        count=job.pods,
        request=request,
        preferred_topology=RACK if job.is_gang else None,
    )
    return Workload(
        namespace="bench",
        name=job.name,
        created=_EPOCH + timedelta(minutes=job.arrival, microseconds=int(job.name[4:])),
        pod_sets=(pod_set,),
    )
