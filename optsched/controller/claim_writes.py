"""The claim of a DRA pin, written before the pod is ungated: created, kept, or cleared for the next pass.

Order: the ResourceClaim first, then the pod's pin (nodeSelector,
annotations, gate removed). A controller killed in between leaves a claim
owned by a pod still gated: the next pass finds it (the create answers 409),
sees it is this pod's with this slot's spec and goes on to the ungate, so
nothing is lost and no device is claimed twice. A claim of that name that
is not this slot's is deleted when it holds no device (or its owner pod is
gone) and created afresh on the next pass; one allocated to other devices
for a live owner means the slot cannot be enforced: the pod stays gated and
the workload is re-planned (:attr:`ClaimWriter.conflicts`, read by the
repair rules; an entry is dropped once the Retry has been sent or a claim
of that plan is made as planned, so a re-plan is judged afresh). The
selectors of a user's ResourceClaimTemplate are read from the template here
and copied into the claim.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from optsched.controller.claim_sweep import OwnedClaim
from optsched.controller.claims import (
    ClaimPlan,
    ClaimVerdict,
    judge,
    owner_uid,
    template_gpu_request,
    with_template_counts,
)
from optsched.controller.metrics import Metrics
from optsched.controller.views import read_pod
from optsched.kube.client import ApiError
from optsched.kube.writer import Writer
from optsched.model.names import RESOURCE_API

log = logging.getLogger("optsched.controller")

CONFLICTS_KEPT = 1024


class ClaimApi(Protocol):
    """What claim writes need of the writer (and, for reads, its client)."""

    async def create_new(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> bool: ...

    async def delete(
        self, api_version: str, plural: str, name: str, *, namespace: str | None = None, uid: str = ""
    ) -> None: ...

    async def get(self, api_version: str, plural: str, name: str, *, namespace: str | None = None) -> Any: ...


class WriterApi:
    """:class:`ClaimApi` over the writer (creates and deletes, dry-run honoured) and its client (reads)."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    async def create_new(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> bool:
        return await self.writer.create_new(api_version, plural, body, namespace=namespace)

    async def delete(
        self, api_version: str, plural: str, name: str, *, namespace: str | None = None, uid: str = ""
    ) -> None:
        await self.writer.delete(api_version, plural, name, namespace=namespace, uid=uid)

    async def get(self, api_version: str, plural: str, name: str, *, namespace: str | None = None) -> Any:
        if self.writer.client is None:
            raise ApiError(0, "the writer has no API client")
        return await self.writer.client.get(api_version, plural, name, namespace=namespace)


@dataclass(frozen=True)
class ClaimResult:
    """Whether the pod may be ungated now, and what was done."""

    ready: bool
    verdict: ClaimVerdict
    error: str = ""


class ClaimWriter:
    """Makes a pin's claim exist as its slot needs it."""

    def __init__(self, api: ClaimApi, metrics: Metrics) -> None:
        self.api = api
        self.metrics = metrics
        self.conflicts: dict[tuple[str, str], str] = {}
        """(namespace, plan id) -> why a slot of it cannot be enforced: the workload is re-planned."""

    async def ensure(self, plan: ClaimPlan) -> ClaimResult:
        """Create the claim, or judge the one found; ``ready``: the pod may be ungated."""
        body = await self._body(plan)
        if isinstance(body, str):
            return ClaimResult(False, ClaimVerdict.WAIT, body)
        if await self.api.create_new(RESOURCE_API, "resourceclaims", body, namespace=plan.namespace):
            self.metrics.claims_created.inc()
            self.settled(plan.namespace, plan.plan_id)
            return ClaimResult(True, ClaimVerdict.CREATE)
        existing = await self._get(plan.namespace, plan.name)
        live = existing is not None and await self._owner_live(plan.namespace, existing)
        verdict = judge(existing, body, owner_live=live)
        if verdict != ClaimVerdict.KEEP:
            self.metrics.claim_conflicts.labels(verdict.value).inc()
        if verdict == ClaimVerdict.KEEP:
            self.settled(plan.namespace, plan.plan_id)
            return ClaimResult(True, verdict)
        if verdict == ClaimVerdict.DELETE and existing is not None:
            uid = str((existing.get("metadata") or {}).get("uid", ""))
            await self.api.delete(
                RESOURCE_API, "resourceclaims", plan.name, namespace=plan.namespace, uid=uid
            )
            log.info(
                "claim %s/%s was not this slot's; deleted, created again next pass", plan.namespace, plan.name
            )
        elif verdict == ClaimVerdict.CONFLICT:
            why = (
                f"ResourceClaim {plan.namespace}/{plan.name} is allocated to other devices for "
                f"another owner; slot {plan.pod_set}/{plan.slot.index} cannot be enforced"
            )
            log.warning("%s: re-planning", why)
            if len(self.conflicts) >= CONFLICTS_KEPT:
                self.conflicts.clear()
            self.conflicts[(plan.namespace, plan.plan_id)] = why
        return ClaimResult(False, verdict)

    def settled(self, namespace: str, plan_id: str) -> None:
        """Forget the conflict of a plan: its Retry was sent, or a claim of it was made as planned (a
        re-plan that picks the same slots gets the same plan id, and is judged afresh)."""
        self.conflicts.pop((namespace, plan_id), None)

    async def sweep(self, claim: OwnedClaim) -> bool:
        """Delete an orphaned claim (its uid a precondition) once a live read confirms its owner pod is gone;
        True if it was deleted."""
        if claim.owner_name:
            try:
                pod = await self.api.get("v1", "pods", claim.owner_name, namespace=claim.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                pod = None
            if isinstance(pod, dict) and read_pod(pod).uid == claim.owner_uid:
                return False  # the informer had not delivered it yet
        try:
            await self.api.delete(
                RESOURCE_API, "resourceclaims", claim.name, namespace=claim.namespace, uid=claim.uid
            )
        except ApiError as exc:
            if exc.conflict:
                return False  # replaced by a claim of the same name since it was read
            raise
        self.metrics.claims_swept.inc()
        owner = f"pod {claim.owner_name} ({claim.owner_uid})" if claim.owner_name else "no pod"
        log.info("swept ResourceClaim %s: its owner, %s, is gone", claim.key, owner)
        return True

    async def _body(self, plan: ClaimPlan) -> dict[str, Any] | str:
        """The claim, with the templates' counts and selectors read; a string says why it cannot be made."""
        counts: dict[str, int] = {}
        selectors: dict[str, tuple[Mapping[str, Any], ...]] = {}
        for name in {r.template for r in plan.requests if r.template}:
            template = await self._get(plan.namespace, name, plural="resourceclaimtemplates")
            found = template_gpu_request(template) if template is not None else f"template {name} not found"
            if isinstance(found, str):
                return found
            counts[name], selectors[name] = found
        requests = with_template_counts(plan.requests, counts)
        if isinstance(requests, str):
            return requests
        full = ClaimPlan(**{**plan.__dict__, "requests": requests})
        problem = full.problem()
        return problem if problem is not None else full.body(selectors)

    async def _get(self, namespace: str, name: str, plural: str = "resourceclaims") -> dict[str, Any] | None:
        try:
            found = await self.api.get(RESOURCE_API, plural, name, namespace=namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return found if isinstance(found, dict) else None

    async def _owner_live(self, namespace: str, claim: Mapping[str, Any]) -> bool:
        """The claim's controller owner is a pod that exists, runs or will, and is not being deleted."""
        refs = (claim.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
        if ref is None or ref.get("kind") != "Pod":
            return True  # not a pod's: whoever holds it, it is not ours to take
        try:
            pod = await self.api.get("v1", "pods", str(ref.get("name", "")), namespace=namespace)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        view = read_pod(pod if isinstance(pod, dict) else {})
        return view.uid == owner_uid(claim) and view.live
