"""The emulated kubelet and device plugin: kept devices, freed devices, best-effort picks, refusals."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from optsched.agent.device_plugin import GpuPod, allocate, pod_from_object
from optsched.agent.devices import Discovery, MigInstance
from optsched.agent.podresources import ContainerDevices, PodDevices, PodResourcesClient, serve_pod_resources
from tests.agent.boxes import bridged_a100

GPU = "nvidia.com/gpu"
NONE: frozenset[int] = frozenset()


def pod(name: str, *counts: int, namespace: str = "ml") -> GpuPod:
    return GpuPod(namespace, name, f"uid-{name}", tuple((f"c{i}", n) for i, n in enumerate(counts)))


def indices(held: PodDevices, discovery: Discovery) -> list[tuple[int, ...]]:
    by_uuid = {g.uuid: g.index for g in discovery.gpus}
    return [tuple(by_uuid[u] for u in c.ids(GPU)) for c in held.containers]


def holding(name: str, discovery: Discovery, *gpus: int) -> PodDevices:
    uuids = tuple(discovery.by_index(g).uuid for g in gpus)
    return PodDevices("ml", name, (ContainerDevices("c0", ((GPU, uuids),)),))


def test_new_pods_get_the_best_effort_choice_one_after_another() -> None:
    a100 = bridged_a100()
    result = allocate([pod("a", 2), pod("b", 1), pod("c", 2)], [], a100, NONE)
    assert [indices(p, a100) for p in result.pods] == [[(0, 1)], [(2,)], [(4, 5)]]
    assert result.rejected == ()
    assert result.pods[0].containers[0].devices == ((GPU, (a100.by_index(0).uuid, a100.by_index(1).uuid)),)


def test_a_pod_that_held_gpus_keeps_them_even_unhealthy_and_new_pods_get_others() -> None:
    a100 = bridged_a100()
    before = [holding("old", a100, 2, 3)]
    result = allocate([pod("new", 2), pod("old", 2)], before, a100, frozenset({3, 0}))
    assert result.pods[1] == before[0]
    assert indices(result.pods[0], a100) == [(4, 5)]


def test_a_pod_that_is_gone_frees_its_gpus() -> None:
    a100 = bridged_a100()
    before = [holding("gone", a100, 0, 1), holding("stays", a100, 2, 3)]
    result = allocate([pod("stays", 2), pod("next", 2)], before, a100, NONE)
    assert [p.name for p in result.pods] == ["stays", "next"]
    assert indices(result.pods[1], a100) == [(0, 1)]


def test_unhealthy_and_mig_enabled_gpus_are_never_handed_out() -> None:
    a100 = bridged_a100()
    gpus = list(a100.gpus)
    gpus[4] = replace(gpus[4], mig_enabled=True, mig_instances=(MigInstance("7g.40gb", 0, 8),))
    with_mig = replace(a100, gpus=tuple(gpus))
    result = allocate([pod("a", 5)], [], with_mig, frozenset({0, 2}))
    assert indices(result.pods[0], with_mig) == [(1, 3, 5, 6, 7)]


def test_containers_are_served_in_order_and_a_container_without_gpus_is_listed_empty() -> None:
    a100 = bridged_a100()
    result = allocate([pod("a", 1, 0, 2)], [], a100, NONE)
    assert indices(result.pods[0], a100) == [(0,), (), (2, 3)]
    assert result.pods[0].containers[1] == ContainerDevices("c1")


def test_a_pod_that_does_not_fit_is_refused_whole_and_frees_its_earlier_picks() -> None:
    a100 = bridged_a100()
    result = allocate([pod("big", 1, 8), pod("small", 1)], [], a100, NONE)
    assert [p.name for p in result.pods] == ["small"]
    assert indices(result.pods[0], a100) == [(0,)]
    (refused,) = result.rejected
    assert (refused.namespace, refused.name) == ("ml", "big")
    assert "c1" in refused.reason and "asks for 8" in refused.reason and "only 7" in refused.reason


def test_a_pod_listed_twice_is_allocated_once() -> None:
    a100 = bridged_a100()
    result = allocate([pod("a", 2), pod("a", 2)], [], a100, NONE)
    assert len(result.pods) == 1


def at(second: int) -> datetime:
    return datetime(2025, 3, 1, 12, 0, second, tzinfo=UTC)


def test_pods_new_in_one_pass_are_admitted_in_bind_order_whatever_order_they_are_listed_in() -> None:
    a100 = bridged_a100()
    later = replace(pod("a-later", 2), bound_at=at(9))
    first = replace(pod("b-first", 2), bound_at=at(3))
    result = allocate([later, first], [], a100, NONE)
    assert [p.name for p in result.pods] == ["a-later", "b-first"], "listed in the given order"
    assert [indices(p, a100) for p in result.pods] == [[(2, 3)], [(0, 1)]], "the pod bound first chose first"


def test_pods_bound_in_the_same_second_go_by_namespace_and_name_and_unknown_times_last() -> None:
    a100 = bridged_a100()
    unknown = pod("a-unknown", 2)
    tied_z = replace(pod("z", 2, namespace="a"), bound_at=at(5))
    tied_b = replace(pod("b", 2), bound_at=at(5))
    result = allocate([unknown, tied_z, tied_b], [], a100, NONE)
    chosen = {p.name: indices(p, a100) for p in result.pods}
    assert chosen == {"z": [(0, 1)], "b": [(2, 3)], "a-unknown": [(4, 5)]}


def test_a_refused_pod_frees_nothing_for_pods_admitted_before_it() -> None:
    a100 = bridged_a100()
    big = replace(pod("a-big", 8), bound_at=at(2))
    small = replace(pod("b-small", 2), bound_at=at(1))
    result = allocate([big, small], [], a100, NONE)
    assert [p.name for p in result.pods] == ["b-small"] and indices(result.pods[0], a100) == [(0, 1)]
    assert [r.name for r in result.rejected] == ["a-big"]


def test_the_emulated_holdings_read_back_through_the_pod_resources_client(tmp_path: Path) -> None:
    a100 = bridged_a100()
    result = allocate([pod("a", 2), pod("b", 3)], [], a100, NONE)
    server = serve_pod_resources(tmp_path / "kubelet.sock", lambda: list(result.pods))
    try:
        with PodResourcesClient(tmp_path / "kubelet.sock", timeout_s=10.0) as client:
            assert client.list() == list(result.pods)
    finally:
        server.stop(None)


# -- reading Pod objects -----------------------------------------------------------------------------


def pod_object(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "namespace": "ml", "uid": "u1"}, "spec": spec}


def gpus(limits: Any = None, requests: Any = None, name: str = "main", **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = {GPU: limits, "cpu": "1"}
    if requests is not None:
        resources["requests"] = {GPU: requests}
    return {"name": name, "resources": resources, **extra}


def test_a_pod_object_gives_each_container_its_gpu_limit_or_request() -> None:
    obj = pod_object(gpus(limits=2, requests=2), gpus(requests="3", name="b"), {"name": "c"})
    assert pod_from_object(obj) == GpuPod("ml", "p", "u1", (("main", 2), ("b", 3), ("c", 0)))


def test_sidecars_count_before_the_app_and_plain_init_containers_do_not() -> None:
    init = [gpus(limits=1, name="setup"), gpus(limits=1, name="proxy", restartPolicy="Always")]
    parsed = pod_from_object(pod_object(gpus(limits=2), init=init))
    assert parsed is not None
    assert parsed.containers == (("proxy", 1), ("main", 2))


def test_the_bind_time_is_pod_scheduled_else_the_creation_and_unreadable_times_are_unknown() -> None:
    obj = pod_object(gpus(limits=1))
    obj["metadata"]["creationTimestamp"] = "2025-03-01T12:00:01Z"
    assert (parsed := pod_from_object(obj)) is not None and parsed.bound_at == at(1)
    obj["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2025-03-01T12:00:02Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2025-03-01T12:00:09Z"},
        ]
    }
    assert (parsed := pod_from_object(obj)) is not None and parsed.bound_at == at(1)
    obj["status"]["conditions"][0] |= {"status": "True", "lastTransitionTime": "2025-03-01T12:00:04Z"}
    assert (parsed := pod_from_object(obj)) is not None and parsed.bound_at == at(4)
    obj["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    obj["metadata"]["creationTimestamp"] = 17
    assert (parsed := pod_from_object(obj)) is not None and parsed.bound_at is None


def test_null_fields_read_as_absent_and_namespace_defaults() -> None:
    obj = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "m", "resources": None}], "initContainers": None},
    }
    assert pod_from_object(obj) == GpuPod("default", "p", "", (("m", 0),))


@pytest.mark.parametrize(
    "obj",
    [
        pod_object(gpus(limits="1.5")),
        pod_object(gpus(limits=-1)),
        pod_object(gpus(limits=True)),
        pod_object(gpus(limits="two")),
        pod_object(gpus(limits=1.0)),
        pod_object({"name": "m", "resources": ["limits"]}),
        pod_object({"name": "m", "resources": {"limits": "4"}}),
        pod_object({"resources": {}}),
        pod_object("main"),  # type: ignore[arg-type]
        {"metadata": {"name": "p"}, "spec": {"containers": "main"}},
        {"metadata": {"namespace": "ml"}, "spec": {"containers": []}},
        {"metadata": "p", "spec": {"containers": []}},
        {"metadata": {"name": "p"}},
    ],
)
def test_a_pod_object_with_an_unusable_field_is_none(obj: dict[str, Any]) -> None:
    assert pod_from_object(obj) is None
