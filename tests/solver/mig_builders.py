"""MIG nodes for solver tests: GPUs with instances, their allocatable and the usage of in-use ones."""

from __future__ import annotations

from collections import Counter

from optsched.mig.layout import resource_name
from optsched.model.mig import MigGpu, MigInstanceState
from optsched.model.snapshot import Node, NodeUsage
from tests.builders import H100, node

Instance = tuple[str, int] | tuple[str, int, bool]
"""(profile, start) or (profile, start, in use)."""


def mig_gpu(
    index: int, *instances: Instance, model: str = "H100-80GB", hold: str = "", changing: bool = False
) -> MigGpu:
    return MigGpu(
        index=index,
        uuid=f"GPU-{index}",
        model=model,
        instances=tuple(
            MigInstanceState(profile=i[0], start=i[1], in_use=bool(i[2]) if len(i) == 3 else False)
            for i in instances
        ),
        hold=hold,
        changing=changing,
    )


def mig_node(name: str, *gpus: MigGpu, product: str = H100, rack: str = "r1") -> tuple[Node, NodeUsage]:
    """A node whose GPUs are all MIG-enabled, advertising its instances; the usage of those in use."""
    count = len(gpus)
    allocatable = Counter(resource_name(i.profile) for g in gpus for i in g.instances)
    used = Counter(resource_name(i.profile) for g in gpus for i in g.in_use)
    base = node(name, gpus=count, product=product, rack=rack, unhealthy=frozenset(range(count)))
    built = base.model_copy(update={"mig_gpus": tuple(gpus), "extended": dict(allocatable)})
    return built, NodeUsage(extended=dict(used))
