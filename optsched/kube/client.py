"""The one Kubernetes transport: REST calls on kr8s's raw API, typed, with one error mapping.

kr8s's object layer needs API discovery for every custom resource and hides
the content type of a patch; the controller needs server-side apply on a
status subresource, JSON merge patches with a resourceVersion precondition
and streaming watches. Calling the REST paths directly keeps all of that
explicit. Every call goes through :meth:`Client._call`, the only place where
an answer becomes :class:`ApiError`: an HTTP error status keeps its status (so
callers can tell a conflict from a missing object), no answer at all
(connection refused, TLS failure, a dropped stream, no answer in time) is
status 0.

Every call is bounded: a request (its answer included) by the client's
``request_timeout``, connecting by the same bound, and a watch by a read
timeout a little above its ``timeoutSeconds``, so a half-open connection
ends the stream instead of hanging its reader forever.

The transport is anything with kr8s's ``call_api`` (an async context manager
yielding an ``httpx.Response`` and raising on error statuses), so tests run
the client against a fake server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import httpx

from optsched.errors import InputError

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

Object = dict[str, Any]

DEFAULT_REQUEST_TIMEOUT_S = 30.0
"""How long one API call may take, its answer included, unless the client is told otherwise."""
WATCH_READ_MARGIN_S = 10.0
"""At most this much above its ``timeoutSeconds`` a watch waits for a line: the server ends a healthy
stream first. The margin is one request timeout where that is shorter."""


class Transport(Protocol):
    """kr8s's raw call: ``base/version[/namespaces/ns]/url``; raises with ``.response`` on error statuses."""

    def call_api(
        self,
        method: str = ...,
        version: str = ...,
        base: str = ...,
        namespace: str | None = ...,
        url: str = ...,
        **kwargs: Any,
    ) -> AbstractAsyncContextManager[httpx.Response]: ...


class ApiError(Exception):
    """An API server answer other than success; status 0 when no answer came at all."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"HTTP {status}: {message}" if status else message)

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def unreachable(self) -> bool:
        return self.status == 0


def one_line(exc: BaseException) -> str:
    """The first line of an exception's text (or its type), for messages of a single line."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (kr8s wraps httpx's timeouts in its own)."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    return chain


def _api_error(exc: Exception) -> ApiError | None:
    """The ApiError an exception of the transport stands for; None when it is not about the API."""
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response):
        try:
            body = response.json()
            message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
        except (ValueError, httpx.ResponseNotRead):
            message = ""
        return ApiError(response.status_code, message or one_line(exc))
    for cause in _causes(exc):
        if isinstance(cause, httpx.TimeoutException):
            return ApiError(0, f"no answer from the API server in time: {one_line(cause)}")
        if isinstance(cause, httpx.TransportError | OSError):
            return ApiError(0, f"cannot reach the API server: {one_line(cause)}")
    return None


class Unreachable(InputError):
    """The kubeconfig is usable but the API server did not answer (a restart, a network fault):
    a long-running caller may try again, a one-shot verb reports it."""


def _base(api_version: str) -> str:
    return "/api" if "/" not in api_version else "/apis"


class Client:
    """REST calls on one transport (kr8s's API object, which owns authentication and TLS)."""

    def __init__(
        self,
        transport: Transport,
        *,
        source: str = "the default kubeconfig",
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be positive, got {request_timeout}")
        self.transport = transport
        self.source = source
        """The kubeconfig the client was built from, as messages name it."""
        self.request_timeout = request_timeout
        """Seconds one call may take, its answer included; then it fails as unreachable (status 0)."""

    @classmethod
    async def connect(
        cls, kubeconfig: str | None, *, request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    ) -> Client:
        """A client for ``kubeconfig`` (None: in-cluster or the default); InputError naming it if unusable.

        Connecting asks the server for its version: an answer that does not come
        within ``request_timeout`` is an InputError too, never a hang.
        """
        import kr8s.asyncio  # deferred: kr8s is slow to import and only the live-cluster verbs need it

        source = kubeconfig or "the default kubeconfig"
        if kubeconfig is not None and not os.path.isfile(kubeconfig):
            raise InputError("no such file", source=kubeconfig)
        try:
            async with asyncio.timeout(request_timeout):
                api = await kr8s.asyncio.api(kubeconfig=kubeconfig)
        except TimeoutError as exc:
            raise Unreachable(
                f"cannot reach the API server: no answer within {request_timeout:g}s", source=source
            ) from exc
        except (httpx.HTTPError, OSError) as exc:
            raise Unreachable(f"cannot reach the API server: {one_line(exc)}", source=source) from exc
        except Exception as exc:
            raise InputError(f"cannot load kubeconfig: {one_line(exc)}", source=source) from exc
        api.timeout = httpx.Timeout(request_timeout)
        return cls(api, source=source, request_timeout=request_timeout)

    @contextlib.asynccontextmanager
    async def _call(
        self,
        method: str,
        api_version: str,
        url: str,
        *,
        namespace: str | None,
        stream: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[httpx.Response]:
        """One request; every failure of the transport leaves here as :class:`ApiError`.

        A plain request is bounded as a whole by :attr:`request_timeout` (the
        caller only reads the answer already received inside the block); a
        stream is bounded by the read timeout its caller passes.
        """
        deadline = None if stream else self.request_timeout
        if not stream:
            kwargs.setdefault("timeout", httpx.Timeout(self.request_timeout))
        try:
            async with (
                asyncio.timeout(deadline),
                self.transport.call_api(
                    method,
                    version=api_version,
                    base=_base(api_version),
                    namespace=namespace,
                    url=url,
                    stream=stream,
                    **kwargs,
                ) as response,
            ):
                yield response
        except TimeoutError as exc:
            raise ApiError(0, f"no answer from the API server within {self.request_timeout:g}s") from exc
        except Exception as exc:
            error = _api_error(exc)
            if error is None:
                raise
            raise error from exc

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
    ) -> Object:
        """The JSON answer of one call (``{}`` for an empty or non-object answer)."""
        url = "/".join(part for part in (plural, name, subresource) if part)
        kwargs: dict[str, Any] = {}
        if params:
            kwargs["params"] = params
        if body is not None:
            kwargs["content"] = json.dumps(body).encode()
            kwargs["headers"] = {"Content-Type": content_type or "application/json"}
        async with self._call(method, api_version, url, namespace=namespace, **kwargs) as response:
            data = response.json() if response.content else {}
        return data if isinstance(data, dict) else {}

    async def get(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
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
    ) -> list[Object]:
        """The items of a list (as the server sends them: built-in kinds lack ``kind``)."""
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
    ) -> Object:
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
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
    ) -> Object:
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request("POST", api_version, plural, namespace=namespace, params=params, body=body)

    async def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        uid: str = "",
    ) -> Object:
        """Delete one object; with ``uid``, only that one (a precondition: 409 on another of that name)."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}} if uid else None
        return await self.request("DELETE", api_version, plural, namespace=namespace, name=name, body=body)

    async def replace(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> Object:
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
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Object]:
        """Watch events (``{"type": ..., "object": ...}``) until the server ends the stream.

        From ``resource_version`` (an informer's last list or event); without
        it, "from now on": the resourceVersion of a one-item list, so a watch
        started after a full read misses nothing and replays nothing. The
        stream's read timeout is ``timeout_seconds`` plus a margin: the server
        ends a healthy stream first, a half-open connection ends with
        :class:`ApiError` status 0.
        """
        selector = {
            key: value
            for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector))
            if value
        }
        version = resource_version
        if version is None:
            listing = await self.request(
                "GET", api_version, plural, namespace=namespace, params={"limit": "1", **selector}
            )
            version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **selector,
        }
        if version:
            params["resourceVersion"] = version
        margin = min(WATCH_READ_MARGIN_S, self.request_timeout)
        read_timeout = httpx.Timeout(self.request_timeout, read=timeout_seconds + margin)
        async with self._call(
            "GET", api_version, plural, namespace=namespace, params=params, stream=True, timeout=read_timeout
        ) as response:
            async for line in response.aiter_lines():
                event = _event(line)
                if event is not None:
                    yield event


def _event(line: str) -> Object | None:
    """One watch event from one line of the stream; None for a blank or unreadable line."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
