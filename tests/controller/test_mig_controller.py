"""MIG layout changes through the whole decision and the last phase: holds, admission, writes, RBAC."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from optsched.controller.act import Actor
from optsched.controller.actions import ActionKind, Decisions
from optsched.controller.decide import decide
from optsched.controller.inputs import build_input
from optsched.controller.metrics import Metrics
from optsched.controller.mig_decide import HOLD_PREFIX, MigDecisions, NodeMigWrite
from optsched.controller.options import DeferPolicy, Options
from optsched.kube.client import ApiError
from optsched.model.names import NODE_GPUS_API
from optsched.model.plan import Decision, WorkloadDecision
from optsched.model.snapshot import CheckState
from tests.controller.objects import base_objects, mig_node_gpus, node, workload
from tests.controller.test_mig_decide import THREE, admit, change, plan, record

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
RBAC = Path(__file__).resolve().parents[2] / "manifests" / "base" / "rbac.yaml"


def objects(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [*base_objects(node("n1", gpus=1)), workload("w", gpus=0), *extra]


def test_a_workload_planned_onto_new_slices_stays_pending_until_it_is_planned_on_slices_that_exist() -> None:
    inp = build_input(objects(mig_node_gpus("n1", {0: []})), ("optsched",))
    held = decide(inp, plan(admit("w"), changes=(change(),)), now=NOW)
    [act] = held.actions
    assert act.kind == ActionKind.WAIT_LAYOUT and act.check is not None
    assert act.check.state == CheckState.PENDING and act.check.message.startswith(
        HOLD_PREFIX + "node n1 GPU 0"
    )
    assert [w.node for w in held.mig.writes] == ["n1"]
    later = decide(inp, plan(admit("w", waits=False)), now=NOW)
    assert [a.kind for a in later.actions] == [ActionKind.ADMIT]


def test_a_workload_waiting_for_a_change_in_flight_is_not_sent_back_past_its_hold_time() -> None:
    pending = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Pending")
    inp = build_input(objects(pending), ("optsched",))
    deferred = plan(WorkloadDecision(name="default/w", decision=Decision.DEFER))
    policy = DeferPolicy(hold_seconds=60, mig_start_seconds=600)
    later = NOW + timedelta(minutes=5)
    [act] = decide(inp, deferred, now=later, policy=policy).actions
    assert act.kind == ActionKind.WAIT_LAYOUT and act.check is not None
    assert act.check.state == CheckState.PENDING
    again = build_input(
        [*objects(pending)[:-2], workload("w", gpus=0, message=act.check.message), pending], ("optsched",)
    )
    [same] = decide(again, deferred, now=later, policy=policy).actions
    assert same.kind == ActionKind.WAIT_LAYOUT and not same.writes  # the message is already there


def test_a_failed_change_lets_the_plans_decision_through() -> None:
    failed = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, record=record(), state="Failed", message="x")
    inp = build_input(objects(failed), ("optsched",))
    out = decide(inp, plan(WorkloadDecision(name="default/w", decision=Decision.DEFER)), now=NOW)
    assert [a.kind for a in out.actions] == [ActionKind.DEFER]
    assert [o for w in out.mig.writes for o in w.outcomes] == [("failed", 0)]


def test_nothing_new_is_planned_on_a_gpu_whose_written_change_is_in_flight() -> None:
    """The controller's own write makes the next snapshot hold the GPU, so the planner leaves it alone."""
    idle = mig_node_gpus("n1", {0: []})
    first = decide(build_input(objects(idle), ("optsched",)), plan(admit("w"), changes=(change(),)), now=NOW)
    [write] = first.mig.writes
    written = mig_node_gpus("n1", {0: []}, spec={0: list(THREE)}, generation=2, observed=1, state="Success")
    written["metadata"]["annotations"] = write.patch()["metadata"]["annotations"]
    [n1] = build_input(objects(written), ("optsched",)).snapshot.nodes
    [gpu] = n1.mig_gpus
    assert "in flight" in gpu.hold
    assert build_input(objects(idle), ("optsched",)).snapshot.nodes[0].mig_gpus[0].hold == ""


class Writer:
    def __init__(self, fail: ApiError | None = None) -> None:
        self.fail = fail
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.events: list[str] = []

    async def merge_patch(self, api_version: str, plural: str, name: str, body: dict[str, Any]) -> None:
        if self.fail is not None:
            raise self.fail
        self.patches.append((api_version, plural, body))

    async def event(self, event: Any, **_: Any) -> None:
        self.events.append(event.reason)


def _send(writer: Writer, write: NodeMigWrite) -> tuple[Metrics, list[str], tuple[str, ...]]:
    metrics, stale = Metrics(), []
    clock = lambda: NOW  # noqa: E731
    actor = Actor(
        writer,  # type: ignore[arg-type]
        metrics,
        Options(),
        is_leader=lambda: True,
        clock=clock,
        on_stale=lambda: stale.append("stale"),
    )
    decisions = Decisions(mig=MigDecisions(writes=(write,), holds={"default/w": "m"}, in_flight=1))
    outcome = asyncio.run(actor.act(decisions))
    return metrics, stale, outcome.errors


def _counted(metrics: Metrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value("optsched_mig_layout_changes_total", {"outcome": outcome})
    return value or 0.0


def test_a_layout_write_is_one_patch_onto_the_version_read_counted_once_it_lands() -> None:
    inp = build_input(objects(mig_node_gpus("n1", {0: []})), ("optsched",))
    [write] = decide(inp, plan(admit("w"), changes=(change(),)), now=NOW).mig.writes
    writer = Writer()
    metrics, stale, errors = _send(writer, write)
    [(api, plural, body)] = writer.patches
    assert (api, plural) == (NODE_GPUS_API, "nodegpus") and body["metadata"]["resourceVersion"] == "5"
    assert _counted(metrics, "written") == 1 and writer.events == ["MIGLayoutChangeWritten"] and not errors
    assert metrics.registry.get_sample_value("optsched_workloads_waiting_for_mig_layout") == 1
    refused = Writer(fail=ApiError(409, "the object has been modified"))
    metrics, stale, errors = _send(refused, write)
    assert _counted(metrics, "written") == 0 and refused.events == [] and stale == ["stale"] and errors


def _rules(plural: str) -> set[str]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text(encoding="utf-8")) if d]
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "optsched"]
    return {
        v
        for r in role["rules"]
        if "optsched.io" in r["apiGroups"] and plural in r["resources"]
        for v in r["verbs"]
    }


def test_the_controller_may_patch_nodegpus_but_never_their_status_nor_delete_them() -> None:
    assert _rules("nodegpus") == {"get", "list", "watch", "patch"}
    assert _rules("nodegpus/status") == set()
