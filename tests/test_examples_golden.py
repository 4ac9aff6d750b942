"""Golden behaviour on the bundled examples: what a person running the README demo sees."""

from pathlib import Path

import pytest

from optsched import planning
from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.settings import Settings
from optsched.snapshot.build import load_snapshot
from optsched.validate import check_plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SETTINGS = Settings(time_limit_s=20, workers=1, random_seed=7)


@pytest.fixture(scope="module")
def small() -> Snapshot:
    return load_snapshot(EXAMPLES / "cluster-small.yaml")


@pytest.fixture(scope="module")
def small_plan(small: Snapshot) -> Plan:
    return planning.plan(small, SETTINGS, "optimizer")


def short(name: str) -> str:
    """``team-a/job-nccl-pair-b19e7`` -> ``nccl-pair``."""
    return name.split("/", 1)[1].removeprefix("job-").rsplit("-", 1)[0]


def test_optimizer_defers_exactly_what_cannot_or_should_not_run(small: Snapshot, small_plan: Plan) -> None:
    assert check_plan(small, small_plan) == []
    assert {short(w.name) for w in small_plan.deferred} == {
        "llm-giant-405b",
        "h100-eval-8",
        "t4-batch",
        "gb200-smoke",
    }
    assert small_plan.status.value in ("OPTIMAL", "FEASIBLE")


def test_high_priority_gangs_land_whole_and_in_place(small: Snapshot, small_plan: Plan) -> None:
    by_name = {short(w.name): w for w in small_plan.admitted}
    pretrain = by_name["llm-pretrain-70b"].pod_sets[0].pods
    racks = {small.node(p.node).labels["cloud.provider.com/topology-rack"] for p in pretrain}  # type: ignore[union-attr]
    assert len(pretrain) == 4 and len(racks) == 1
    (pair,) = by_name["nccl-pair"].pod_sets[0].pods
    node = small.node(pair.node)
    assert node is not None and pair.gpus is not None
    assert any(set(pair.gpus) <= set(island) for island in node.nvlink_islands)
    assert len(by_name["bert-hpo"].pod_sets[0].pods) == 5  # minCount 3, room for 5


def test_deferral_reasons_name_the_blocking_constraint(small_plan: Plan) -> None:
    reasons = {short(w.name): " ".join(r.message for r in w.reasons) for w in small_plan.deferred}
    assert "in one cloud.provider.com/topology-rack" in reasons["llm-giant-405b"]
    assert "quota" in reasons["t4-batch"]
    assert "nodeSelector nvidia.com/gpu.product=NVIDIA-GB200" in reasons["gb200-smoke"]
    assert "14 fail" in reasons["gb200-smoke"]


def test_optimizer_admits_more_than_every_baseline_on_the_example(small: Snapshot, small_plan: Plan) -> None:
    for policy in ("firstfit", "bestfit", "fgd", "tas", "leastallocated"):
        plan = planning.plan(small, policy=policy)
        assert check_plan(small, plan) == []
        assert small_plan.summary.gpus_admitted >= plan.summary.gpus_admitted, policy


def test_fifo_trap_optimum_is_32_where_greedy_gets_24() -> None:
    trap = load_snapshot(EXAMPLES / "fifo-trap.yaml")
    best = planning.plan(trap, SETTINGS, "optimizer")
    greedy = planning.plan(trap, policy="bestfit")
    assert check_plan(trap, best) == [] and check_plan(trap, greedy) == []
    assert (best.summary.gpus_admitted, greedy.summary.gpus_admitted) == (32, 24)
    assert {short(w.name) for w in best.admitted} == {"train-2x8", "train-8", "train-2x4"}


def test_the_mixed_dra_example_pins_claims_on_dra_nodes_and_predicts_elsewhere() -> None:
    mixed = load_snapshot(EXAMPLES / "cluster-dra.yaml")
    dra_01 = mixed.node("dra-h100-01")
    assert dra_01 is not None and dra_01.gpu_mode.value == "dra" and dra_01.unhealthy_gpus == frozenset({5})
    assert mixed.usage_of("dra-h100-01").gpu_milli[:2] == (1000, 1000)
    assert [left.name for left in mixed.left_out] == ["job-sweep-3e4f5"]
    plan = planning.plan(mixed, SETTINGS, "optimizer")
    assert check_plan(mixed, plan) == []
    for decision in plan.admitted:
        for pod in (p for ps in decision.pod_sets for p in ps.pods):
            node = mixed.node(pod.node)
            assert node is not None
            expected = "dra" if node.gpu_mode.value == "dra" else "predicted"
            assert pod.enforcement == expected, (decision.name, pod)
            if expected == "dra":
                assert pod.gpu_uuids == tuple(node.gpu_uuids[g] for g in pod.gpus or ())
    (pretrain,) = plan.decision("ml/job-pretrain-8-1f2e3").pod_sets[0].pods  # type: ignore[union-attr]
    assert pretrain.node == "dra-h100-02"
    assert sum(plan.summary.enforcement.values()) == plan.summary.pods_admitted == 5
    tune = plan.decision("ml/job-tune-pairs-4d5e6")
    assert tune is not None and {p.node for p in tune.pod_sets[0].pods} == {"dra-h100-01"}
