"""Node filters: selectors, affinity, taints, flavors, GPU facts."""

from optsched.capacity.eligibility import candidates, node_verdict
from optsched.model.snapshot import (
    GpuMode,
    NodeSelectorTerm,
    ResourceFlavor,
    SelectorRequirement,
    Taint,
    Toleration,
)
from tests.builders import A100, H100, gpu_queue, node, pods, snapshot, workload

NO_SCHEDULE = Taint(key="pool", value="inference", effect="NoSchedule")


def test_taints_need_tolerations() -> None:
    tainted = node("t", taints=(NO_SCHEDULE,))
    assert not node_verdict(tainted, pods(1, 1), None).ok
    assert "taint pool=inference" in node_verdict(tainted, pods(1, 1), None).reason
    tolerant = pods(1, 1, tolerations=(Toleration(key="pool", operator="Exists"),))
    assert node_verdict(tainted, tolerant, None).ok


def test_node_selector_and_affinity() -> None:
    n = node("n", product=H100)
    assert node_verdict(n, pods(1, 1, node_selector={"nvidia.com/gpu.product": H100}), None).ok
    assert not node_verdict(n, pods(1, 1, node_selector={"nvidia.com/gpu.product": A100}), None).ok
    term = NodeSelectorTerm(
        match_expressions=(SelectorRequirement(key="nvidia.com/gpu.product", operator="In", values=(A100,)),)
    )
    blocked = pods(1, 1).model_copy(update={"affinity_terms": (term,)})
    assert node_verdict(n, blocked, None).reason == "required node affinity"


def test_flavor_labels_and_gpu_facts() -> None:
    flavor = ResourceFlavor(name="a100", node_labels={"nvidia.com/gpu.product": A100})
    assert not node_verdict(node("h", product=H100), pods(1, 1), flavor).ok
    assert node_verdict(
        node("a", product=A100, islands=[[0, 1], [2, 3], [4, 5], [6, 7]]), pods(1, 2), flavor
    ).ok
    pairs = node("a", product=A100, islands=[[0, 1], [2, 3], [4, 5], [6, 7]])
    assert "largest NVLink island has 2" in node_verdict(pairs, pods(1, 4, nvlink_required=True), None).reason
    assert "healthy GPUs" in node_verdict(node("small", gpus=4), pods(1, 8), None).reason


def test_candidates_follow_the_cluster_queue_flavors() -> None:
    from optsched.model.snapshot import LocalQueue

    cq = gpu_queue("cq", gpus=16, flavor="a100")
    w = workload("w", pods(1, 1), queue="lq")
    snap = snapshot(
        [node("h1", product=H100), node("a1", product=A100)],
        [w],
        cluster_queues=[cq],
        local_queues=[LocalQueue(namespace="default", name="lq", cluster_queue="cq")],
        flavors=[ResourceFlavor(name="a100", node_labels={"nvidia.com/gpu.product": A100})],
    )
    (choice,) = candidates(snap, w, w.pod_sets[0])
    assert choice.flavor is not None and choice.flavor.name == "a100"
    assert [n.name for n in choice.nodes] == ["a1"]
    assert sum(choice.excluded.values()) == 1


def test_gpus_asked_through_claim_templates_only_fit_dra_nodes() -> None:

    templated = pods(1, 2)
    templated = templated.model_copy(
        update={"request": templated.request.model_copy(update={"dra_gpus": True})}
    )
    plugin = node("dp")
    dra = plugin.model_copy(update={"gpu_mode": GpuMode.DRA})
    assert (
        node_verdict(plugin, templated, None).reason
        == "GPUs asked through a ResourceClaimTemplate need a DRA node"
    )
    assert node_verdict(dra, templated, None).ok
    assert node_verdict(plugin, pods(1, 2), None).ok and node_verdict(dra, pods(1, 2), None).ok
