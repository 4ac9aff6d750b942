"""Free GPUs and whether a demand fits: the conservative "capacity is free" of the stuck rule."""

from __future__ import annotations

from e2e.chaos.capacity import Demand, fits, free_gpus
from tests.e2e_chaos.objects import node, observe, pod, workload

RACK = "cloud.provider.com/topology-rack"


def test_free_gpus_take_out_bound_pods_unhealthy_gpus_and_unusable_nodes() -> None:
    obs = observe(
        1,
        pods=[pod("a", node="n1", gpus=3), pod("leaving", node="n1", gpus=1, deleting=True)],
        nodes=[
            node("n1"),
            node("n2", unhealthy=(7,)),
            node("down", ready=False),
            node("tainted", taints=("NoSchedule",)),
            node("cpu", gpus=0),
        ],
    )
    assert free_gpus(obs) == {"n1": 4, "n2": 7}


def test_slots_of_a_ready_workload_whose_pods_have_not_bound_are_taken() -> None:
    ready = workload("w", owner="j", plan="p", slots=[(0, "n1", [0, 1]), (1, "n1", [2, 3])], admitted=True)
    one_bound = pod("w-0", node="n1", gpus=2, plan="p", index=0, owner="j")
    assert free_gpus(observe(1, nodes=[node("n1")], workloads=[ready])) == {"n1": 4}
    assert free_gpus(observe(1, pods=[one_bound], nodes=[node("n1")], workloads=[ready])) == {"n1": 4}


def test_a_gang_fits_only_inside_one_product_and_one_required_domain() -> None:
    nodes = {
        n.name: n
        for n in observe(
            1,
            nodes=[
                node("h1", rack="r1"),
                node("h2", rack="r2"),
                node("a1", product="A100", rack="r1"),
            ],
        ).nodes.values()
    }
    free = {"h1": 8, "h2": 8, "a1": 8}
    assert fits(Demand(2, 8, "H100"), nodes, free)
    assert not fits(Demand(2, 8, "H100", RACK), nodes, free)
    assert not fits(Demand(3, 8), nodes, free), "three whole nodes exist only across two products"
    assert fits(Demand(4, 2, "A100", min_pods=2), nodes, {"h1": 8, "h2": 8, "a1": 4})
    assert not fits(Demand(4, 2, "A100"), nodes, {"h1": 8, "h2": 8, "a1": 4})


def test_a_gang_allowed_to_mix_products_may_spread_over_all_of_them() -> None:
    nodes = {n.name: n for n in observe(1, nodes=[node("h1"), node("a1", product="A100")]).nodes.values()}
    free = {"h1": 3, "a1": 3}
    assert not fits(Demand(5, 1), nodes, free)
    assert fits(Demand(5, 1, mixed=True), nodes, free)
