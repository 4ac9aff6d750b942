"""The GPU columns for every request kind: whole GPUs, shares, MIG slices, GPUs left to the node."""

from __future__ import annotations

from optsched.model.placement import PodPlacement
from optsched.model.plan import Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from optsched.render.facts import needs_text, node_groups, pods_by_gpus, shape_text
from optsched.render.table import render_table
from optsched.render.text import compact_nodes
from tests.builders import node, pods, snapshot, workload

MIG = "nvidia.com/mig-1g.10gb"


def admitted(name: str, *placed: PodPlacement) -> WorkloadDecision:
    return WorkloadDecision(
        name=f"default/{name}", decision="admit", pod_sets=[PodSetPlacement(name="main", pods=list(placed))]
    )


def test_gpus_left_to_the_node_show_as_any_n_with_each_pods_gpus() -> None:
    pair = workload("pair", pods(2, 2))
    share = workload("share", pods(1, 1, gpu_milli=250))
    mig = workload("mig", pods(1, 0, extended={MIG: 2}))
    unknown = [PodPlacement(index=i, node="n1") for i in range(2)]
    assert compact_nodes(node_groups(admitted("pair", *unknown), pair)) == ["n1[any 4]"]
    assert compact_nodes(node_groups(admitted("share", PodPlacement(index=0, node="n1")), share)) == [
        "n1[any 1]"
    ]
    indexed = admitted(
        "pair", PodPlacement(index=0, node="n1", gpus=(0, 1)), PodPlacement(index=1, node="n2")
    )
    assert compact_nodes(node_groups(indexed, pair)) == ["n1[0-1]", "n2[any 2]"]
    assert compact_nodes(node_groups(admitted("mig", PodPlacement(index=0, node="a1", gpus=())), mig)) == [
        "a1"
    ]


def test_mig_pods_show_their_slices_in_pods_x_gpus_and_needs() -> None:
    two = pods(3, 0, extended={MIG: 2}, min_count=2)
    assert shape_text(two.request) == "2 mig-1g.10gb"
    assert shape_text(pods(1, 0, extended={MIG: 1}).request) == "mig-1g.10gb"
    assert needs_text(workload("mig", two)) == "4 mig-1g.10gb"
    mixed = workload("mixed", pods(2, 1), pods(1, 0, name="side", extended={MIG: 1}))
    assert needs_text(mixed) == "2 + 1 mig-1g.10gb"
    assert needs_text(workload("cpu", pods(1, 0))) == "0"


def test_the_deferred_table_shows_what_a_mig_workload_needs() -> None:
    wl = workload("mig", pods(4, 0, extended={MIG: 2}))
    snap = snapshot([node("a1", gpus=0, extended={MIG: 7})], [wl])
    plan = Plan(
        status=PlanStatus.HEURISTIC,
        policy="test",
        workloads=[WorkloadDecision(name="default/mig", decision="defer")],
    )
    row = next(line for line in render_table(snap, plan).splitlines() if "default/mig" in line)
    assert row.split()[2:6] == ["4", "x", "2", "mig-1g.10gb"]
    assert "8 mig-1g.10gb" in row
    assert pods_by_gpus(plan.workloads[0], wl) == "4 x 2 mig-1g.10gb"
