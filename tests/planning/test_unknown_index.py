"""Pods of unknown index on a node: the plan places shares and whole pods there, leaving indices to it."""

from __future__ import annotations

import pytest

from optsched import planning
from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.model.snapshot import NodeUsage, Snapshot
from optsched.render.table import render_table
from optsched.settings import Settings
from optsched.validate import check_plan
from tests.builders import node, pods, snapshot, workload

ONE_UNKNOWN = NodeUsage(unknown_index_gpus=1, cpu_milli=1000, memory_mib=4096, pods=1)


def cluster() -> Snapshot:
    share = workload("share", pods(1, 1, gpu_milli=500))
    pair = workload("pair", pods(1, 2))
    return snapshot([node("n1", gpus=4)], [share, pair], usage={"n1": ONE_UNKNOWN})


@pytest.mark.parametrize("policy", ["optimizer", "bestfit", "fgd", "firstfit", "tas", "leastallocated"])
def test_a_share_and_a_two_gpu_pod_fit_beside_a_gpu_pod_of_unknown_index(policy: str) -> None:
    snap = cluster()
    plan = planning.plan(snap, Settings(workers=1, time_limit_s=5), policy)
    assert check_plan(snap, plan) == []
    assert {d.name for d in plan.admitted} == {"default/share", "default/pair"}
    for decision in plan.admitted:
        (pod,) = decision.pod_sets[0].pods
        assert pod.node == "n1" and pod.gpus is None
    assert plan.summary.gpus_free_after == 0  # 4 GPUs: the unknown one, the pair, the share's


def test_the_table_shows_any_n_with_the_gpus_each_pod_takes() -> None:
    snap = cluster()
    text = render_table(snap, planning.plan(snap, Settings(workers=1, time_limit_s=5)))
    pair = next(line for line in text.splitlines() if "default/pair" in line)
    share = next(line for line in text.splitlines() if "default/share" in line)
    assert "n1[any 2]" in pair and "1 x 2" in pair
    assert "n1[any 1]" in share and "1 x 0.5" in share


def test_a_third_pod_does_not_fit_once_every_gpu_is_counted() -> None:
    more = workload("more", pods(1, 1, gpu_milli=250))
    snap = cluster().model_copy(update={"workloads": (*cluster().workloads, more)})
    plan = planning.plan(snap, Settings(workers=1, time_limit_s=5))
    assert check_plan(snap, plan) == []
    assert len(plan.admitted) == 2
    (deferred,) = plan.deferred
    assert "GPU" in deferred.reasons[0].message and "CPU, memory" not in deferred.reasons[0].message


def _plan(*pods_: tuple[str, PodPlacement], deferred: tuple[str, ...] = ()) -> Plan:
    decisions = [
        WorkloadDecision(
            name=f"default/{name}", decision="admit", pod_sets=[PodSetPlacement(name="main", pods=[p])]
        )
        for name, p in pods_
    ]
    decisions += [WorkloadDecision(name=f"default/{name}", decision="defer") for name in deferred]
    return Plan(status=PlanStatus.HEURISTIC, policy="test", workloads=decisions)


def test_the_validator_counts_a_share_left_to_the_node_as_a_whole_gpu() -> None:
    shares = [workload(f"s{i}", pods(1, 1, gpu_milli=100)) for i in range(4)]
    snap = snapshot([node("n1", gpus=4)], shares, usage={"n1": ONE_UNKNOWN})
    three = _plan(*((f"s{i}", PodPlacement(index=0, node="n1")) for i in range(3)), deferred=("s3",))
    assert check_plan(snap, three) == []
    four = _plan(*((f"s{i}", PodPlacement(index=0, node="n1")) for i in range(4)))
    assert any("GPUs over-committed" in v for v in check_plan(snap, four))
    named = _plan(("s0", PodPlacement(index=0, node="n1", gpus=(2,))), deferred=("s1", "s2", "s3"))
    assert any(
        "may be held by one of the 1 in-use GPUs of unknown index" in v for v in check_plan(snap, named)
    )


def test_more_gpus_of_unknown_index_than_look_free_leave_the_partly_used_ones_to_plan() -> None:
    """Both GPUs carry shares of known index and a share of unknown index counts whole: none looks free.

    The snapshot's over-full count is not the plan's over-commit: the node
    still takes a CPU pod and a share on a partly used GPU, and nothing whole.
    """
    usage = NodeUsage(gpu_milli=(300, 300), gpu_mem_mib=(0, 0), unknown_index_gpus=1, cpu_milli=3000, pods=3)
    jobs = [
        workload("share", pods(1, 1, gpu_milli=200)),
        workload("cpu", pods(1, 0)),
        workload("whole", pods(1, 1)),
    ]
    snap = snapshot([node("n1", gpus=2)], jobs, usage={"n1": usage})
    for policy in ("optimizer", "bestfit"):
        plan = planning.plan(snap, Settings(workers=1, time_limit_s=5), policy)
        assert plan.status != PlanStatus.FALLBACK, plan.warnings
        assert {d.name for d in plan.admitted} == {"default/share", "default/cpu"}
        decision = plan.decision("default/share")
        assert decision is not None
        assert decision.pod_sets[0].pods[0].gpus in ((0,), (1,))
