"""The plan says per pod how its GPUs are enforced and names them by UUID where the node knows them."""

from __future__ import annotations

from optsched import planning
from optsched.model.placement import Enforcement, Placement, PodPlacement, WorkloadAssignment
from optsched.model.plan import Plan, PlanStatus
from optsched.model.snapshot import GpuMode, Node, NodeUsage, Snapshot
from optsched.planning.build import build_plan
from optsched.validate import check_plan
from tests.builders import node, pods, snapshot, workload

UUIDS = tuple(f"GPU-d{i}" for i in range(8))


def dra(name: str = "dra-1", *, uuids: tuple[str, ...] = UUIDS) -> Node:
    return node(name).model_copy(update={"gpu_mode": GpuMode.DRA, "gpu_uuids": uuids})


def plan_of(snap: Snapshot, placed: dict[str, list[PodPlacement]]) -> Plan:
    placement = Placement(
        admitted={
            key: WorkloadAssignment(pods={"main": pods_}, flavors={"main": None})
            for key, pods_ in placed.items()
        }
    )
    return build_plan(snap, placement, status=PlanStatus.HEURISTIC, policy="test")


def pod(node_name: str, gpus: tuple[int, ...] | None, index: int = 0, **extra: object) -> PodPlacement:
    return PodPlacement(index=index, node=node_name, gpus=gpus, **extra)  # type: ignore[arg-type]


def placed_pods(plan: Plan, name: str) -> list[PodPlacement]:
    decision = plan.decision(name)
    assert decision is not None
    return [p for ps in decision.pod_sets for p in ps.pods]


def test_whole_gpus_on_a_dra_node_are_dra_with_their_uuids() -> None:
    snap = snapshot([dra()], [workload("w", pods(1, 2))])
    plan = plan_of(snap, {"default/w": [pod("dra-1", (3, 5))]})
    (placed,) = placed_pods(plan, "default/w")
    assert placed.enforcement == Enforcement.DRA and placed.gpu_uuids == ("GPU-d3", "GPU-d5")
    assert plan.summary.enforcement == {"dra": 1, "predicted": 0, "none": 0}
    assert check_plan(snap, plan) == []


def test_whole_gpus_on_a_device_plugin_node_are_predicted_and_named_by_uuid_where_known() -> None:
    known = node("dp-1").model_copy(update={"gpu_uuids": UUIDS})
    snap = snapshot([known, node("dp-2")], [workload("a", pods(1, 1)), workload("b", pods(1, 1))])
    plan = plan_of(snap, {"default/a": [pod("dp-1", (0,))], "default/b": [pod("dp-2", (0,))]})
    (a,) = placed_pods(plan, "default/a")
    (b,) = placed_pods(plan, "default/b")
    assert (a.enforcement, a.gpu_uuids) == (Enforcement.PREDICTED, ("GPU-d0",))
    assert (b.enforcement, b.gpu_uuids) == (Enforcement.PREDICTED, None)


def test_shares_unknown_indices_hami_nodes_and_cpu_pods_are_not_enforced() -> None:
    hami = node("hami-1").model_copy(update={"hami": True})
    busy = {"dra-1": NodeUsage(unknown_index_gpus=1)}
    workloads = [
        workload("share", pods(1, 1, gpu_milli=500)),
        workload("left", pods(1, 1)),
        workload("hami", pods(1, 1)),
        workload("cpu", pods(1, 0)),
    ]
    snap = snapshot([dra(), hami, node("dp-1")], workloads, usage=busy)
    plan = plan_of(
        snap,
        {
            "default/share": [pod("dp-1", (0,))],
            "default/left": [pod("dra-1", None)],
            "default/hami": [pod("hami-1", (0,))],
            "default/cpu": [pod("dp-1", None)],
        },
    )
    for name in ("share", "left", "hami", "cpu"):
        assert [p.enforcement for p in placed_pods(plan, f"default/{name}")] == [Enforcement.NONE], name
    assert plan.summary.enforcement == {"dra": 0, "predicted": 0, "none": 4}


def test_a_dra_node_missing_a_gpus_uuid_cannot_pin_it() -> None:
    snap = snapshot([dra(uuids=UUIDS[:4])], [workload("w", pods(1, 2))])
    (placed,) = placed_pods(plan_of(snap, {"default/w": [pod("dra-1", (3, 4))]}), "default/w")
    assert placed.enforcement == Enforcement.NONE and placed.gpu_uuids is None


def test_a_value_the_policy_set_is_kept() -> None:
    snap = snapshot([dra()], [workload("w", pods(1, 1))])
    chosen = pod("dra-1", (0,), enforcement=Enforcement.NONE, gpu_uuids=("GPU-d0",))
    (placed,) = placed_pods(plan_of(snap, {"default/w": [chosen]}), "default/w")
    assert placed.enforcement == Enforcement.NONE


def test_every_policy_labels_its_pods() -> None:
    snap = snapshot([dra(), node("dp-1")], [workload("a", pods(2, 4)), workload("b", pods(1, 8))])
    for policy in ("bestfit", "firstfit", "optimizer"):
        plan = planning.plan(snap, policy=policy)
        assert check_plan(snap, plan) == [], policy
        labels = {p.node: p.enforcement for w in plan.admitted for ps in w.pod_sets for p in ps.pods}
        assert set(labels.values()) <= {Enforcement.DRA, Enforcement.PREDICTED}, policy
        assert all(
            label == (Enforcement.DRA if n == "dra-1" else Enforcement.PREDICTED)
            for n, label in labels.items()
        )
        assert sum(plan.summary.enforcement.values()) == plan.summary.pods_admitted
