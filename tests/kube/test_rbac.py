"""The shipped ClusterRole lets the controller read every kind its snapshot lists, and no more verbs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optsched.kube.documents import KINDS

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "base" / "rbac.yaml"


def _cluster_role() -> dict[str, Any]:
    documents = [d for d in yaml.safe_load_all(RBAC.read_text(encoding="utf-8")) if d]
    [role] = [d for d in documents if d.get("kind") == "ClusterRole" and d["metadata"]["name"] == "optsched"]
    return role


def _granted(role: dict[str, Any], group: str, plural: str) -> set[str]:
    verbs: set[str] = set()
    for rule in role["rules"]:
        names_only = bool(rule.get("resourceNames"))  # a rule for named objects grants no list
        if group in rule.get("apiGroups", []) and plural in rule.get("resources", []) and not names_only:
            verbs |= set(rule.get("verbs", []))
    return verbs


def test_every_kind_the_snapshot_lists_can_be_read_and_watched() -> None:
    role = _cluster_role()
    missing = {
        f"{kind.group or 'core'}/{kind.plural}": sorted(
            {"get", "list", "watch"} - _granted(role, kind.group, kind.plural)
        )
        for kind in KINDS
    }
    assert {name: verbs for name, verbs in missing.items() if verbs} == {}


def test_nothing_the_snapshot_reads_may_be_deleted() -> None:
    """Except ResourceClaims, and only one at a time: DRA mode deletes its own stale or orphaned claims."""
    role = _cluster_role()
    assert [
        k.plural for k in KINDS if {"delete", "deletecollection", "*"} & _granted(role, k.group, k.plural)
    ] == ["resourceclaims"]
    assert {"deletecollection", "*"} & _granted(role, "resource.k8s.io", "resourceclaims") == set()


def _documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC.read_text(encoding="utf-8")) if d]


def test_secure_metrics_may_review_tokens_and_prometheus_gets_a_role_to_bind() -> None:
    role = _cluster_role()
    assert "create" in _granted(role, "authentication.k8s.io", "tokenreviews")
    assert "create" in _granted(role, "authorization.k8s.io", "subjectaccessreviews")
    [reader] = [d for d in _documents() if d["metadata"]["name"] == "optsched-metrics-reader"]
    assert reader["kind"] == "ClusterRole"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_secrets_are_read_by_name_only() -> None:
    [role] = [d for d in _documents() if d["kind"] == "Role" and d["metadata"]["name"] == "optsched"]
    rules = [r for r in role["rules"] if "secrets" in r.get("resources", [])]
    assert all(r.get("resourceNames") == ["optsched-webhook-tls"] for r in rules if "get" in r["verbs"])
    assert {v for r in rules if not r.get("resourceNames") for v in r["verbs"]} == {"create"}
