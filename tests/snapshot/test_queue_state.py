"""Reading the admission facts: names, stop policies, Active conditions, selectors and Namespace labels."""

from __future__ import annotations

from optsched.model.admission import LabelSelector
from optsched.model.snapshot import SelectorRequirement
from optsched.snapshot.queue_state import admission_facts
from tests.kueue import objects as o


def test_facts_hold_what_the_rule_reads_and_which_kinds_were_listed() -> None:
    stopped = o.local_queue("paused", stop="HoldAndDrain")
    stopped["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    selector = {"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    cq = o.cluster_queue(
        selector=selector, condition={"status": "False", "reason": "Stopped", "message": "m"}
    )
    foreign = {**o.flavor("not-kueue"), "apiVersion": "example.com/v1"}
    facts, warnings = admission_facts(
        [
            cq,
            stopped,
            o.flavor(),
            foreign,
            o.admission_check("prov", active="False"),
            o.namespace("team", team="a"),
        ]
    )
    assert warnings == []
    assert facts.kinds == {"ClusterQueue", "LocalQueue", "ResourceFlavor", "AdmissionCheck", "Namespace"}
    assert facts.flavors == {"gpu"}
    lq = facts.local_queue("team", "paused")
    assert lq is not None and (lq.cluster_queue, lq.stop_policy, lq.terminating) == (
        "cq",
        "HoldAndDrain",
        True,
    )
    state = facts.cluster_queues["cq"]
    assert state.namespace_selector == LabelSelector(
        match_labels={"team": "a"}, match_expressions=(SelectorRequirement(key="tier", operator="Exists"),)
    )
    assert state.active is not None and state.active.inactive and state.active.reason == "Stopped"
    check = facts.admission_checks["prov"]
    assert check.controller_name == "example.com/provisioner"
    assert check.active is not None and check.active.inactive
    assert facts.namespace_labels("team") == {"team": "a", "kubernetes.io/metadata.name": "team"}
    assert facts.namespace_labels("absent") is None


def test_an_absent_selector_is_nil_and_an_empty_one_selects_everything() -> None:
    facts, _ = admission_facts([o.cluster_queue("nil", selector=None), o.cluster_queue("all", selector={})])
    assert facts.cluster_queues["nil"].namespace_selector is None
    every = facts.cluster_queues["all"].namespace_selector
    assert every is not None and every.empty and every.matches({})


def test_unreadable_fields_are_warnings_naming_object_field_and_reading() -> None:
    lq = o.local_queue(stop="Pause")
    ns = o.namespace("team")
    ns["metadata"]["labels"] = ["not", "a", "map"]
    facts, warnings = admission_facts([lq, ns, o.cluster_queue(selector="team=a")], source="dump.yaml")  # type: ignore[arg-type]
    assert warnings == [
        "dump.yaml: LocalQueue team/lq: field spec.stopPolicy: expected one of None, Hold, HoldAndDrain, "
        "got 'Pause'; read as None",
        "dump.yaml: Namespace team: field metadata.labels: expected a mapping of strings; "
        "read with no labels but its name",
        "dump.yaml: ClusterQueue cq: field spec.namespaceSelector: expected a label selector "
        "(matchLabels, matchExpressions); read as {} (every namespace selected)",
    ]
    lq_state = facts.local_queue("team", "lq")
    assert lq_state is not None and lq_state.stop_policy == "None"
    assert facts.namespace_labels("team") == {"kubernetes.io/metadata.name": "team"}
    selector = facts.cluster_queues["cq"].namespace_selector
    assert selector is not None and selector.empty
