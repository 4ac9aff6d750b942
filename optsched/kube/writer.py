"""Every write optsched makes to the cluster, in one place, each one safe to repeat.

* Our admission check entry: server-side apply on the Workload ``status``
  subresource with our field manager. The list is keyed by ``name``, so the
  apply owns our entry only and never touches Kueue's or another check's.
* The placement record: a JSON merge patch on the Workload's annotations that
  carries ``metadata.uid`` as a precondition (a Workload deleted and recreated
  under the same name is never written by mistake).
* Pod pins: a JSON merge patch with ``metadata.resourceVersion`` (optimistic
  concurrency: 409 on any concurrent change, retried after a re-read).
* Events: on objects that could not be used, and on Workloads whose check changed.

With ``dry_run`` nothing is sent: each write is logged as the request it
would have been. Either way the last :data:`SENT_KEPT` writes are kept in
:attr:`Writer.sent` (a long-running leader must not keep every write it
ever made).

Writes that act on what a cycle read carry preconditions: the record patch
the Workload's uid and resourceVersion, the Ready apply the uid and the
resourceVersion the record patch produced, so a decision made on a Workload
that Kueue evicted or changed meanwhile fails with 409 and is made again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from optsched.kube.client import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, ApiError, Client
from optsched.model.events import Event
from optsched.model.names import KUEUE_API

log = logging.getLogger("optsched.writer")

SENT_KEPT = 1000
"""How many of the latest writes :attr:`Writer.sent` keeps."""


def _target(plural: str, namespace: str | None, name: str) -> str:
    """``plural/namespace/name`` (``plural/name`` for cluster-scoped objects), as writes are logged."""
    return f"{plural}/{namespace + '/' if namespace else ''}{name}"


@dataclass(frozen=True)
class Write:
    """One request, as sent (or as it would have been sent in dry-run)."""

    verb: str
    target: str
    body: Any

    def describe(self) -> str:
        return f"{self.verb} {self.target} {json.dumps(self.body, sort_keys=True)}"


@dataclass
class Writer:
    client: Client | None
    field_manager: str = "optsched"
    dry_run: bool = False
    sent: list[Write] = field(default_factory=list)

    def _record(self, verb: str, target: str, body: Any) -> bool:
        """Log and keep the write; True when it should really be sent."""
        write = Write(verb, target, body)
        self.sent.append(write)
        if len(self.sent) > SENT_KEPT:
            del self.sent[: len(self.sent) - SENT_KEPT]
        if self.dry_run:
            log.info("dry-run: would %s", write.describe())
            return False
        log.debug("%s", write.describe())
        return True

    def _client(self) -> Client:
        if self.client is None:
            raise RuntimeError("writer has no API client")
        return self.client

    async def _patch(
        self,
        verb: str,
        target: str,
        api_version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        namespace: str | None,
        content_type: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Record one patch and send it unless in dry-run (``{}``); applies force, as the fields are ours."""
        if not self._record(verb, target, body):
            return {}
        return await self._client().patch(
            api_version,
            plural,
            name,
            body,
            namespace=namespace,
            subresource=subresource,
            content_type=content_type,
            field_manager=self.field_manager,
            force=content_type == APPLY_PATCH,
        )

    async def apply_check(
        self,
        namespace: str,
        name: str,
        entries: dict[str, Any] | list[dict[str, Any]],
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> None:
        """Server-side apply of our ``status.admissionChecks`` entries (force: they are ours).

        ``uid`` and ``resource_version`` are preconditions: the apply fails
        with 409 on another object of that name, or on a newer version.
        """
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if resource_version:
            metadata["resourceVersion"] = resource_version
        body = {
            "apiVersion": KUEUE_API,
            "kind": "Workload",
            "metadata": metadata,
            "status": {"admissionChecks": entries if isinstance(entries, list) else [entries]},
        }
        await self._patch(
            "apply-status",
            _target("workloads", namespace, name),
            KUEUE_API,
            "workloads",
            name,
            body,
            namespace=namespace,
            content_type=APPLY_PATCH,
            subresource="status",
        )

    async def set_annotation(
        self,
        api_version: str,
        plural: str,
        namespace: str | None,
        name: str,
        key: str,
        value: str | None,
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> str:
        """Set (or with ``None`` remove) one annotation; ``uid`` and ``resource_version`` are preconditions.

        Returns the object's resourceVersion after the write ("" in dry-run).
        """
        metadata: dict[str, Any] = {"annotations": {key: value}}
        if uid:
            metadata["uid"] = uid
        if resource_version:
            metadata["resourceVersion"] = resource_version
        body = {"metadata": metadata}
        written = await self._patch(
            "merge-patch",
            _target(plural, namespace, name),
            api_version,
            plural,
            name,
            body,
            namespace=namespace,
            content_type=MERGE_PATCH,
        )
        return str(((written or {}).get("metadata") or {}).get("resourceVersion") or "")

    async def merge_patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> None:
        """A JSON merge patch (lists replace, ``None`` removes a key), on the object or a subresource."""
        target = _target(plural, namespace, name) + (f"/{subresource}" if subresource else "")
        await self._patch(
            "merge-patch",
            target,
            api_version,
            plural,
            name,
            body,
            namespace=namespace,
            content_type=MERGE_PATCH,
            subresource=subresource,
        )

    async def patch_pod(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        await self._patch(
            "merge-patch",
            _target("pods", namespace, name),
            "v1",
            "pods",
            name,
            body,
            namespace=namespace,
            content_type=MERGE_PATCH,
        )

    async def json_patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        ops: list[dict[str, Any]],
        *,
        namespace: str | None = None,
    ) -> None:
        if not ops:
            return
        await self._patch(
            "json-patch",
            _target(plural, namespace, name),
            api_version,
            plural,
            name,
            ops,
            namespace=namespace,
            content_type=JSON_PATCH,
        )

    async def create(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> None:
        """Create an object; one that already exists is left as it is."""
        name = (body.get("metadata") or {}).get("name", "")
        if self._record("create", _target(plural, namespace, name), body):
            try:
                await self._client().create(
                    api_version, plural, body, namespace=namespace, field_manager=self.field_manager
                )
            except ApiError as exc:
                if exc.status != 409:
                    raise

    async def delete(self, api_version: str, plural: str, name: str, *, namespace: str | None = None) -> None:
        """Delete an object; one already gone is fine."""
        if self._record("delete", _target(plural, namespace, name), None):
            try:
                await self._client().request("DELETE", api_version, plural, namespace=namespace, name=name)
            except ApiError as exc:
                if not exc.not_found:
                    raise

    async def apply(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> None:
        """Server-side apply of an object we own (AdmissionCheck status, webhook caBundle)."""
        target = _target(plural, namespace, name) + (f"/{subresource}" if subresource else "")
        await self._patch(
            "apply",
            target,
            api_version,
            plural,
            name,
            body,
            namespace=namespace,
            content_type=APPLY_PATCH,
            subresource=subresource,
        )

    async def event(self, event: Event, *, at: datetime) -> None:
        """A core/v1 Event on the object (namespace ``default`` for cluster-scoped objects).

        ``at`` is the caller's clock reading: the writer keeps no clock of its own.
        """
        now = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace, name = event.namespace, event.name
        ns = namespace or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": ns},
            "involvedObject": {
                "kind": event.kind,
                "apiVersion": event.api_version,
                "name": name,
                "uid": event.uid,
                **({"namespace": namespace} if namespace else {}),
            },
            "reason": event.reason,
            "message": event.message[:1024],
            "type": event.type.value,
            "source": {"component": self.field_manager},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if self._record("create", f"events/{ns}", body):
            try:
                await self._client().create("v1", "events", body, namespace=ns)
            except ApiError as exc:
                log.warning("could not record event on %s %s: %s", event.kind, name, exc)
