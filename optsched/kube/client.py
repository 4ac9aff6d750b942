"""A small typed wrapper over kr8s's raw API calls, for the controller's writes and watches.

kr8s's object layer needs API discovery for every custom resource and hides
the content type of a patch; the controller needs server-side apply on a
status subresource, JSON merge patches with a resourceVersion precondition
and streaming watches. Calling the REST paths directly keeps all of that
explicit. Errors become :class:`ApiError` carrying the HTTP status, so
callers can tell a conflict (409) from a missing object (404).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """An API server answer other than success."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"HTTP {status}: {message}")

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


def _status_and_message(exc: Exception) -> tuple[int, str] | None:
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response):
        try:
            body = response.json()
            message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
        except (ValueError, httpx.ResponseNotRead):
            message = str(exc)
        return response.status_code, message or str(exc)
    return None


def _base(api_version: str) -> str:
    return "/api" if "/" not in api_version else "/apis"


class Client:
    """REST calls on one kr8s API object (which owns authentication and TLS)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @classmethod
    async def connect(cls, kubeconfig: str | None) -> Client:
        import kr8s.asyncio

        return cls(await kr8s.asyncio.api(kubeconfig=kubeconfig))

    async def request(
        self,
        method: str,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        url = "/".join(part for part in (plural, name, subresource) if part)
        kwargs: dict[str, Any] = {}
        if params:
            kwargs["params"] = params
        if body is not None:
            kwargs["content"] = json.dumps(body).encode()
            kwargs["headers"] = {"Content-Type": content_type or "application/json"}
        try:
            async with self.api.call_api(
                method, version=api_version, base=_base(api_version), namespace=namespace, url=url, **kwargs
            ) as resp:
                data = resp.json() if resp.content else {}
        except Exception as exc:
            found = _status_and_message(exc)
            if found is None:
                raise
            raise ApiError(*found) from exc
        return data if isinstance(data, dict) else {}

    async def get(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self.request(
            "GET", api_version, plural, namespace=namespace, name=name, subresource=subresource
        )

    async def list(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        body = await self.request("GET", api_version, plural, namespace=namespace, params=params or None)
        items = body.get("items") or []
        return [i for i in items if isinstance(i, dict)]

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        content_type: str,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        return await self.request(
            "PATCH",
            api_version,
            plural,
            namespace=namespace,
            name=name,
            subresource=subresource,
            params=params or None,
            body=body,
            content_type=content_type,
        )

    async def create(
        self,
        api_version: str,
        plural: str,
        body: Any,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request("POST", api_version, plural, namespace=namespace, params=params, body=body)

    async def replace(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request(
            "PUT", api_version, plural, namespace=namespace, name=name, params=params, body=body
        )

    async def watch(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events (``{"type": ..., "object": ...}``) from now on, until the server ends the stream."""
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        if label_selector:
            params["labelSelector"] = label_selector
        listing = await self.request(
            "GET",
            api_version,
            plural,
            namespace=namespace,
            params={"limit": "1", **({"labelSelector": label_selector} if label_selector else {})},
        )
        version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
        if version:
            params["resourceVersion"] = version
        try:
            async with self.api.call_api(
                "GET",
                version=api_version,
                base=_base(api_version),
                namespace=namespace,
                url=plural,
                params=params,
                stream=True,
                timeout=None,
            ) as resp:
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        yield event
        except Exception as exc:
            found = _status_and_message(exc)
            if found is None:
                raise
            raise ApiError(*found) from exc
