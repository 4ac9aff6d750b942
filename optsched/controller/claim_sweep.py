"""optsched's ResourceClaims whose pod is gone, pure part: found from one cluster read, to be deleted.

Each claim optsched creates is owned by its pod, so Kubernetes' garbage
collector deletes it with the pod. A claim can still outlive its pod: the
pod deleted with orphan propagation, a garbage collector that is not
running, a claim created for a pod deleted in the same instant. Such a
claim selects devices planned for nobody (and, while allocated, holds them),
so the controller sweeps it: a claim named ``optsched-…`` carrying our plan
label whose controller owner pod is not among the pods read (or which has
no pod owner at all) is deleted once it is older than the grace period,
which covers a pod the informer has not delivered yet. The writer confirms
the owner is gone with a live read and deletes with the claim's uid as a
precondition (:meth:`~optsched.controller.claim_writes.ClaimWriter.sweep`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from optsched.kueue import workload_status as ks
from optsched.model.names import CLAIM_PLAN_LABEL, CLAIM_PREFIX


@dataclass(frozen=True)
class OwnedClaim:
    """One of optsched's claims, as the sweep needs it."""

    namespace: str
    name: str
    uid: str
    owner_name: str
    """Its controller owner pod's name; "" when it has none."""
    owner_uid: str
    created: datetime | None
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _owner(meta: Mapping[str, Any]) -> tuple[str, str]:
    for ref in ks.list_or_empty(meta.get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "Pod":
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return "", ""


def owned_claims(objects: Iterable[Mapping[str, Any]]) -> tuple[OwnedClaim, ...]:
    """The ResourceClaims of ``objects`` that optsched made (its name prefix and plan label)."""
    out = []
    for obj in objects:
        if obj.get("kind") != "ResourceClaim":
            continue
        meta = ks.meta(obj)
        name = str(meta.get("name", ""))
        if not name.startswith(CLAIM_PREFIX) or not ks.map_or_empty(meta.get("labels")).get(CLAIM_PLAN_LABEL):
            continue
        owner, owner_uid = _owner(meta)
        out.append(
            OwnedClaim(
                namespace=str(meta.get("namespace") or "default"),
                name=name,
                uid=str(meta.get("uid", "")),
                owner_name=owner,
                owner_uid=owner_uid,
                created=ks.parse_time(meta.get("creationTimestamp")),
                deleting=bool(meta.get("deletionTimestamp")),
            )
        )
    return tuple(out)


def orphans(
    claims: Iterable[OwnedClaim], pod_uids: Iterable[str], *, now: datetime, grace_seconds: int
) -> tuple[OwnedClaim, ...]:
    """The claims to delete: not being deleted, older than ``grace_seconds``, and whose owner pod is not
    among ``pod_uids`` (every pod read that carries our plan-id label, finished ones too)."""
    present = set(pod_uids)
    out = []
    for claim in claims:
        if claim.deleting or claim.created is None or (claim.owner_uid and claim.owner_uid in present):
            continue
        if (now - claim.created).total_seconds() >= grace_seconds:
            out.append(claim)
    return tuple(sorted(out, key=lambda c: c.key))
