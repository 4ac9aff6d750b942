"""Kueue quota: nominal without a cohort, borrowing within limits and the cohort's lendable slack."""

from __future__ import annotations

from optsched.model.snapshot import ClusterQueue, LocalQueue, QuotaReservation, ResourceFlavor, ResourceQuota
from optsched.solver.context import ModelContext
from optsched.solver.modules.quota import Quota
from tests.builders import gpu_queue, node, pods, snapshot, workload
from tests.solver.modules.helpers import apply, context, feasible, fix

WIDE = {("wide", "main"): {"n1": 1, "n2": 1}}
"""Two 8-GPU pods: 16 GPUs of quota."""


def _admitted(*queues: ClusterQueue, reserved: bool = False, admitted: bool = True) -> ModelContext:
    wide = workload("wide", pods(2, 8), queue="lq")
    if reserved:
        wide = wide.model_copy(update={"reservation": QuotaReservation(cluster_queue="team-a")})
    snap = snapshot(
        [node("n1"), node("n2")],
        [wide],
        cluster_queues=list(queues),
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="team-a")],
        flavors=[ResourceFlavor(name="default")],
    )
    ctx = context(snap)
    apply(ctx, Quota())
    if admitted:
        fix(ctx, admit={"wide": True}, pods=WIDE)
    else:
        fix(ctx, admit={"wide": False}, pods={("wide", "main"): {"n1": 0, "n2": 0}})
    return ctx


def _lending(queue: ClusterQueue, limit: int) -> ClusterQueue:
    """``queue`` with a lending limit on its GPU quota."""
    group = queue.resource_groups[0]
    flavor = group.flavors[0]
    resources = tuple(
        r.model_copy(update={"lending_limit": limit}) if r.name == "nvidia.com/gpu" else r
        for r in flavor.resources
    )
    flavor = flavor.model_copy(update={"resources": resources})
    return queue.model_copy(update={"resource_groups": (group.model_copy(update={"flavors": (flavor,)}),)})


def test_without_a_cohort_a_queue_stays_within_nominal() -> None:
    assert not feasible(_admitted(gpu_queue("team-a", gpus=8)))
    assert feasible(_admitted(gpu_queue("team-a", gpus=16)))


def test_a_queue_already_over_its_limit_takes_nothing_more_and_sinks_nothing_else() -> None:
    over = gpu_queue("team-a", gpus=8).model_copy(update={"usage": {"default": {"nvidia.com/gpu": 12}}})
    assert not feasible(_admitted(over))
    assert feasible(_admitted(over, admitted=False))
    borrowed = gpu_queue("team-a", gpus=8, cohort="pool", borrowing_limit=2).model_copy(
        update={"usage": {"default": {"nvidia.com/gpu": 12}}}
    )
    assert feasible(_admitted(borrowed, gpu_queue("team-b", gpus=8, cohort="pool"), admitted=False))


def test_in_a_cohort_a_queue_borrows_up_to_its_borrowing_limit() -> None:
    lender = gpu_queue("team-b", gpus=8, cohort="pool")
    assert not feasible(_admitted(gpu_queue("team-a", gpus=8, cohort="pool", borrowing_limit=4), lender))
    assert feasible(_admitted(gpu_queue("team-a", gpus=8, cohort="pool", borrowing_limit=8), lender))


def test_borrowing_needs_lendable_quota_in_the_cohort() -> None:
    borrower = gpu_queue("team-a", gpus=8, cohort="pool")
    assert feasible(_admitted(borrower, _lending(gpu_queue("team-b", gpus=8, cohort="pool"), 8)))
    assert not feasible(_admitted(borrower, _lending(gpu_queue("team-b", gpus=8, cohort="pool"), 4)))


def test_a_reserved_workload_already_holds_its_quota() -> None:
    assert feasible(_admitted(gpu_queue("team-a", gpus=0), reserved=True))


def test_resources_without_quota_are_not_counted() -> None:
    only_cpu = gpu_queue("team-a", gpus=8)
    group = only_cpu.resource_groups[0]
    flavor = group.flavors[0].model_copy(update={"resources": (ResourceQuota(name="cpu", nominal=10**7),)})
    only_cpu = only_cpu.model_copy(
        update={"resource_groups": (group.model_copy(update={"flavors": (flavor,)}),)}
    )
    assert feasible(_admitted(only_cpu))
