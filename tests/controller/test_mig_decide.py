"""The MIG layout rules on hand-made plans and NodeGPUs: write, follow, hold, report failures, drop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optsched.controller.inputs import build_input
from optsched.controller.mig_decide import HOLD_PREFIX, MigDecisions, NodeMigWrite, mig_decisions
from optsched.controller.mig_nodes import ChangeRecord, Layout, mig_nodes, parse_records, records_annotation
from optsched.controller.views import WorkloadView
from optsched.model.events import EventType
from optsched.model.mig import MigChange, slots
from optsched.model.placement import PodPlacement
from optsched.model.plan import Decision, Plan, PlanStatus, PodSetPlacement, WorkloadDecision
from tests.controller.objects import base_objects, mig_node_gpus, node, workload

NOW = 1_767_225_600.0
THREE = (("3g.40gb", 4),)
ONES = (("1g.10gb", 0), ("1g.10gb", 1))
TIMEOUT = 300.0


def views(*names: str, check: str = "Pending") -> Mapping[str, WorkloadView]:
    objects = [*base_objects(node("n1")), *(workload(n, gpus=0, check=check) for n in names)]
    return build_input(objects, ("optsched",)).workloads


def admit(name: str, node_name: str = "n1", gpu: int = 0, *, waits: bool = True) -> WorkloadDecision:
    pods = [PodPlacement(index=0, node=node_name, gpus=(gpu,))]
    return WorkloadDecision(
        name=f"default/{name}",
        decision=Decision.ADMIT,
        pod_sets=[PodSetPlacement(name="main", pods=pods)],
        waits_for_layout=[node_name] if waits else [],
    )


def change(gpu: int = 0, to: Layout = THREE, frm: Layout = (), node_name: str = "n1") -> MigChange:
    return MigChange(node=node_name, gpu=gpu, uuid=f"GPU-{node_name}-{gpu}", from_=slots(frm), to=slots(to))


def plan(*decisions: WorkloadDecision, changes: tuple[MigChange, ...] = ()) -> Plan:
    return Plan(status=PlanStatus.OPTIMAL, workloads=list(decisions), mig_changes=list(changes))


def record(gpu: int = 0, to: Layout = THREE, *, served: tuple[str, ...] = ("w",), **extra: Any) -> str:
    workloads = {f"default/{n}": f"uid-{n}" for n in served}
    value = records_annotation([ChangeRecord(gpu=gpu, to=to, workloads=workloads, written_at=NOW, **extra)])
    assert value is not None
    return value


def decide(
    *node_gpus: dict[str, Any],
    the_plan: Plan | None = None,
    names: tuple[str, ...] = ("w",),
    now: float = NOW,
) -> MigDecisions:
    nodes = mig_nodes([node("n1"), node("n2"), *node_gpus])
    return mig_decisions(nodes, the_plan, views(*names), now=now, timeout=TIMEOUT)


def only_write(decisions: MigDecisions) -> NodeMigWrite:
    [write] = decisions.writes
    return write


def test_a_planned_change_is_written_with_whom_it_serves_and_its_workload_waits() -> None:
    ngpu = mig_node_gpus("n1", {0: [], 1: [("7g.80gb", 0)]}, spec={1: [("7g.80gb", 0)]}, state="Success")
    out = decide(ngpu, the_plan=plan(admit("w"), changes=(change(),)))
    write = only_write(out)
    assert write.node == "n1" and write.resource_version == "5" and write.uid == "uid-ngpu-n1"
    assert write.spec == ((0, THREE), (1, (("7g.80gb", 0),)))  # GPU 1's entry kept as read
    records, problem = parse_records(write.record)
    assert problem is None and records[0].to == THREE and records[0].workloads == {"default/w": "uid-w"}
    assert write.outcomes == (("written", 0),)
    assert out.holds["default/w"] == (
        HOLD_PREFIX + "node n1 GPU 0: written to its NodeGPUs spec.migLayout, waiting for the node agent"
    )
    body = write.patch()
    assert body["metadata"]["resourceVersion"] == "5"
    assert body["spec"]["migLayout"][0] == {"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 4}]}


def test_two_changes_on_one_node_are_one_write() -> None:
    ngpu = mig_node_gpus("n1", {0: [], 1: []})
    the_plan = plan(admit("w", gpu=0), admit("v", gpu=1), changes=(change(0), change(1, ONES)))
    write = only_write(decide(ngpu, the_plan=the_plan, names=("w", "v")))
    assert write.spec == ((0, THREE), (1, ONES))
    records, _ = parse_records(write.record)
    assert records[0].workloads == {"default/w": "uid-w"} and records[1].workloads == {"default/v": "uid-v"}


def test_a_change_already_written_is_not_written_again_and_its_workload_keeps_waiting() -> None:
    written = mig_node_gpus(
        "n1", {0: []}, spec={0: list(THREE)}, record=record(), generation=2, observed=1, state="Success"
    )
    again = decide(written, the_plan=plan(admit("w"), changes=(change(),)))
    assert again.writes == ()
    assert again.holds["default/w"].endswith(
        "node n1 GPU 0: waiting for the node agent to take the change up"
    )
    deferred = decide(written, the_plan=plan(WorkloadDecision(name="default/w", decision=Decision.DEFER)))
    assert deferred.writes == () and "default/w" in deferred.holds and deferred.in_flight == 1


def test_a_pending_change_shows_the_agents_words() -> None:
    busy = "waiting for the GPUs to be idle (GPU 0: default/old)"
    pending = mig_node_gpus(
        "n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Pending", message=busy
    )
    out = decide(pending)
    assert out.holds["default/w"] == HOLD_PREFIX + f"node n1 GPU 0: the node agent says Pending ({busy})"


def test_an_applied_change_waits_for_the_node_to_advertise_its_slices() -> None:
    applied = mig_node_gpus("n1", {0: list(THREE)}, spec={0: list(THREE)}, record=record(), state="Success")
    out = decide(applied)
    assert out.writes == ()
    assert out.holds["default/w"].endswith(
        "applied, waiting for the node to advertise nvidia.com/mig-3g.40gb"
    )
    advertised = node("n1")
    advertised["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "1"
    nodes = mig_nodes([advertised, applied])
    done = mig_decisions(nodes, None, views("w"), now=NOW, timeout=TIMEOUT)
    write = only_write(done)
    assert done.holds == {} and write.record is None and write.spec is None
    assert write.outcomes == (("applied", 0),)
    assert [e.reason for e in write.events] == ["MIGLayoutChangeApplied"]


def test_a_failed_change_is_reported_once_and_its_workloads_are_planned_again() -> None:
    failed = mig_node_gpus(
        "n1",
        {0: []},
        spec={0: list(THREE)},
        record=record(),
        state="Failed",
        message="nvml: insufficient resources",
    )
    out = decide(failed)
    assert out.holds == {}
    write = only_write(out)
    assert write.spec is None and write.outcomes == (("failed", 0),)
    assert parse_records(write.record)[0][0].failed_generation == 1
    kinds = {(e.kind, e.name, e.type) for e in write.events}
    assert kinds == {("NodeGPUs", "n1", EventType.WARNING), ("Workload", "w", EventType.WARNING)}
    assert all(
        "node n1 GPU 0" in e.message and "nvml: insufficient resources" in e.message for e in write.events
    )
    reported = mig_node_gpus(
        "n1", {0: []}, spec={0: list(THREE)}, record=record(failed_generation=1), state="Failed", message="x"
    )
    assert decide(reported).writes == ()


def test_a_change_nobody_waits_for_is_dropped_before_the_agent_starts_it() -> None:
    pending = mig_node_gpus(
        "n1", {0: [("1g.10gb", 0)]}, spec={0: list(THREE)}, record=record(), state="Pending", message="busy"
    )
    write = only_write(decide(pending, names=()))
    assert write.spec == ((0, (("1g.10gb", 0),)),)  # restored to the layout the GPU has
    assert write.record is None and write.outcomes == (("dropped", 0),)
    assert "no workload waits" in write.events[0].message


def test_a_change_for_a_namesake_is_dropped_and_one_for_an_admitted_workload_too() -> None:
    pending = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Pending")
    nodes = mig_nodes([node("n1"), pending])
    namesake = build_input([*base_objects(node("n1")), workload("w", gpus=0, uid="other")], ("optsched",))
    assert only_write(mig_decisions(nodes, None, namesake.workloads, now=NOW, timeout=TIMEOUT)).outcomes == (
        ("dropped", 0),
    )
    ready = mig_decisions(nodes, None, views("w", check="Ready"), now=NOW, timeout=TIMEOUT)
    assert only_write(ready).outcomes == (("dropped", 0),)


def test_a_change_being_applied_is_never_dropped() -> None:
    applying = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Applying")
    out = decide(applying, names=(), now=NOW + 10 * TIMEOUT)
    assert out.writes == () and out.in_flight == 1
    # Applying answered an earlier generation (another GPU's change was written since): still applying.
    older = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Applying", observed=0)
    assert decide(older, names=(), now=NOW + 10 * TIMEOUT).writes == ()


def test_a_change_whose_agent_went_silent_while_applying_is_dropped() -> None:
    applying = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Applying")
    applying["status"]["heartbeat"] = "2026-01-01T00:00:00Z"  # NOW, when the change was written
    assert decide(applying, now=NOW + TIMEOUT - 1).writes == ()
    late = decide(applying, now=NOW + TIMEOUT + 1)
    assert only_write(late).outcomes == (("dropped", 0),) and late.holds == {}


def test_a_change_the_agent_does_not_start_in_time_is_dropped() -> None:
    pending = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Pending")
    assert decide(pending, now=NOW + TIMEOUT - 1).writes == ()
    late = decide(pending, now=NOW + TIMEOUT + 1)
    assert only_write(late).outcomes == (("dropped", 0),) and late.holds == {}


def test_a_change_someone_else_made_is_left_alone() -> None:
    theirs = mig_node_gpus("n1", {0: []}, spec={0: list(ONES)}, state="Pending")
    out = decide(theirs, the_plan=plan(admit("w"), changes=(change(),)), names=("w",))
    assert out.writes == ()
    assert out.holds["default/w"].endswith("another layout change (1g.10gb@0, 1g.10gb@1) is in flight on it")
    alone = decide(theirs, names=())
    assert alone.writes == ()


def test_a_plan_made_on_another_layout_is_not_written() -> None:
    moved = mig_node_gpus("n1", {0: [("1g.10gb", 0)]})
    out = decide(moved, the_plan=plan(admit("w"), changes=(change(frm=()),)))
    assert out.writes == ()
    assert "it has layout 1g.10gb@0, not the planned empty" in out.holds["default/w"]


def test_a_workload_already_waiting_gets_no_second_change() -> None:
    in_flight = mig_node_gpus("n1", {0: [], 1: []}, spec={0: list(THREE)}, record=record(), state="Pending")
    out = decide(in_flight, the_plan=plan(admit("w", gpu=1), changes=(change(1, ONES),)))
    assert out.writes == () and "GPU 0" in out.holds["default/w"] and "GPU 1" not in out.holds["default/w"]


def test_writing_on_a_node_restores_our_failed_entry_so_the_agent_does_not_retry_it() -> None:
    failed_record = record(failed_generation=3)
    failed = mig_node_gpus(
        "n1", {0: [], 1: []}, spec={0: list(THREE)}, record=failed_record, state="Failed", generation=3
    )
    write = only_write(
        decide(failed, the_plan=plan(admit("v", gpu=1), changes=(change(1, ONES),)), names=("v",))
    )
    assert write.spec == ((0, ()), (1, ONES))
    assert set(parse_records(write.record)[0]) == {1}


def test_an_unreadable_spec_is_never_rewritten() -> None:
    broken = mig_node_gpus("n1", {0: []})
    broken["spec"] = {"migLayout": [{"gpu": "zero", "instances": []}]}
    out = decide(broken, the_plan=plan(admit("w"), changes=(change(),)))
    assert out.writes == ()
    assert "spec.migLayout[0]: expected {gpu, instances}" in out.holds["default/w"]


def test_a_node_without_nodegpus_holds_its_workloads() -> None:
    out = decide(the_plan=plan(admit("w", node_name="n2"), changes=(change(node_name="n2"),)))
    assert out.writes == () and "node n2: it has no NodeGPUs object" in out.holds["default/w"]


def test_an_admission_on_slices_that_exist_is_not_held() -> None:
    ngpu = mig_node_gpus("n1", {0: list(THREE)})
    out = decide(ngpu, the_plan=plan(admit("w", waits=False)))
    assert out.writes == () and out.holds == {}


def test_a_dropped_change_on_a_gpu_reported_without_mig_removes_its_entry() -> None:
    # GPU 1 is not reported MIG-enabled now (a reset, say): restoring "its layout" would write an
    # empty one, which asks for MIG and no instances; the entry goes instead.
    nodes = mig_node_gpus("n1", {0: []}, spec={1: list(THREE)}, record=record(gpu=1), state="Pending")
    write = only_write(decide(nodes, names=()))
    assert write.outcomes == (("dropped", 1),) and write.spec == ()
