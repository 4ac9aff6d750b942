"""ClusterQueue usage comes from the admitted Workloads' admissions, the status is a cross-check."""

from __future__ import annotations

from typing import Any

from optsched import planning
from optsched.model.reasons import ReasonCode
from optsched.snapshot.build import snapshot_from_objects
from tests.snapshot.raw import GPU, cluster_queue, node, pod, queue_objects, workload


def gpus_used(objects: list[dict[str, Any]]) -> int:
    (cq,) = snapshot_from_objects(objects).cluster_queues
    return cq.usage.get("h100", {}).get(GPU, 0)


def test_without_cluster_queue_status_the_admitted_workloads_still_use_the_quota() -> None:
    # 4 GPUs of quota, two admitted workloads take 2 each: a third may not be promised 2 more.
    objects = [
        node("n1"),
        cluster_queue(gpus=4),
        *queue_objects(),
        workload("a", admitted=True, owner="a"),
        workload("b", admitted=True, owner="b"),
        pod("a-0", "n1", owner="a"),
        pod("b-0", "n1", owner="b"),
        workload("c"),
    ]
    snap = snapshot_from_objects(objects)
    assert snap.cluster_queues[0].usage["h100"][GPU] == 4
    assert not snap.warnings
    plan = planning.plan(snap)
    decision = plan.decision("ml/c")
    assert decision is not None and decision.decision == "defer"
    assert decision.reasons[0].code == ReasonCode.QUOTA_EXHAUSTED
    assert sum(d.gpus for d in plan.admitted) == 0


def test_a_dump_of_cluster_queues_and_pending_workloads_is_planned_from_the_status() -> None:
    objects = [node("n1"), cluster_queue(gpus=4, status_gpus=4), *queue_objects(), workload("c")]
    snap = snapshot_from_objects(objects)
    assert snap.cluster_queues[0].usage["h100"][GPU] == 4
    assert not snap.warnings
    assert planning.plan(snap).decision("ml/c").decision == "defer"  # type: ignore[union-attr]


def test_a_status_that_disagrees_is_named_and_the_larger_figure_is_used() -> None:
    objects = [
        cluster_queue(gpus=8, status_gpus=2),
        workload("a", admitted=True),
        workload("b", admitted=True),
    ]
    snap = snapshot_from_objects([node("n1"), *objects])
    assert snap.cluster_queues[0].usage["h100"][GPU] == 4
    warnings = [w for w in snap.warnings if w.startswith("ClusterQueue")]
    (warning,) = [w for w in warnings if GPU in w]
    assert warning.startswith(f"ClusterQueue cq: flavor h100 {GPU} in use is 4 by its admitted Workloads")
    assert "but 2 by its status; planning with the larger, 4" in warning
    assert any("cpu in use is 2 cores by its admitted Workloads but 0 cores" in w for w in warnings)
    # The status may hold workloads the dump does not (one namespace dumped): the larger wins again.
    lagging = [cluster_queue(gpus=8, status_gpus=6), workload("a", admitted=True)]
    assert gpus_used([node("n1"), *lagging]) == 6


def test_usage_agrees_with_a_status_of_the_same_workloads_without_a_warning() -> None:
    objects = [node("n1"), cluster_queue(gpus=8, status_gpus=4)]
    objects += [workload("a", admitted=True), workload("b", admitted=True)]
    objects[1]["status"]["flavorsReservation"][0]["resources"][0]["total"] = "2"  # cpu: 1 core each
    snap = snapshot_from_objects(objects)
    assert [w for w in snap.warnings if w.startswith("ClusterQueue")] == []


def test_finished_and_released_workloads_hold_no_quota() -> None:
    finished = workload("done", admitted=True, extra_conditions=(("Finished", "True"),))
    released = workload("evicted", admitted=True)
    released["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False"},
        {"type": "Evicted", "status": "True"},
    ]
    evicting = workload("evicting", admitted=True, extra_conditions=(("Evicted", "True"),))
    # An eviction in progress keeps the quota until Kueue releases it.
    assert gpus_used([node("n1"), cluster_queue(), finished, released, evicting]) == 2


def test_reserved_but_not_yet_admitted_workloads_use_quota_too() -> None:
    reserved = workload("waiting", admitted=True)
    reserved["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True"}]
    snap = snapshot_from_objects([node("n1"), cluster_queue(), reserved])
    assert snap.cluster_queues[0].usage["h100"][GPU] == 2
    assert [w.name for w in snap.workloads] == ["waiting"]  # still planned: it waits on its checks
    assert snap.usage_of("n1").unknown_index_gpus == 0  # its pods do not exist yet


def test_without_resource_usage_the_podsets_request_times_its_count_is_used() -> None:
    obj = workload("a", admitted=True, gpus=2, count=3, usage=False)
    snap = snapshot_from_objects([node("n1"), cluster_queue(gpus=16), obj])
    usage = snap.cluster_queues[0].usage["h100"]
    assert (usage[GPU], usage["cpu"]) == (6, 3000)


def test_reclaimable_pods_give_back_their_share_of_the_reservation() -> None:
    obj = workload("a", admitted=True, gpus=2, count=4)
    obj["status"]["reclaimablePods"] = [{"name": "main", "count": 3}]
    assert gpus_used([node("n1"), cluster_queue(gpus=16), obj]) == 2


def test_v1beta1_admissions_are_read_the_same_way() -> None:
    obj = workload("a", admitted=True, api="kueue.x-k8s.io/v1beta1")
    assert gpus_used([node("n1"), cluster_queue(), obj]) == 2


def test_a_malformed_resource_usage_is_named_and_the_request_stands_in() -> None:
    obj = workload("a", admitted=True, gpus=2)
    obj["status"]["admission"]["podSetAssignments"][0]["resourceUsage"][GPU] = "two"
    snap = snapshot_from_objects([node("n1"), cluster_queue(), obj])
    assert snap.cluster_queues[0].usage["h100"][GPU] == 2
    assert any(
        "Workload ml/a" in w and "podSetAssignments[0].resourceUsage.nvidia.com/gpu" in w
        for w in snap.warnings
    )


def test_memory_in_decimal_units_sums_like_the_status_without_a_spurious_warning() -> None:
    # 1G is not a whole number of MiB: summing first, then rounding, matches Kueue's status total.
    objects = [node("n1"), cluster_queue(gpus=8, status_gpus=4)]
    objects[1]["status"]["flavorsReservation"][0]["resources"] = [
        {"name": "cpu", "total": "2"},
        {"name": "memory", "total": "3G"},
        {"name": GPU, "total": "4"},
    ]
    for name in ("a", "b", "c"):
        obj = workload(name, admitted=True, gpus=1)
        obj["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"memory": "1G"}
        objects.append(obj)
    objects[-1]["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {
        "memory": "1G",
        "cpu": "2",
        GPU: "4",
    }
    snap = snapshot_from_objects(objects)
    assert [w for w in snap.warnings if w.startswith("ClusterQueue")] == []
