"""A fake API server behind kr8s's ``call_api`` contract, for the client, the reader and the controller.

:class:`FakeTransport` builds each request the way kr8s does (``base/version
[/namespaces/ns]/url``), records it, asks a handler for the answer and raises
on error statuses as kr8s does (the exception carries ``.response``).
:class:`FakeCluster` is a handler that serves list calls from a set of
objects, at the API versions a real server serves.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from optsched.model.names import KUEUE_API

Handler = Callable[[httpx.Request], httpx.Response]


class FakeTransport:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []
        self.streamed: list[bool] = []

    @contextlib.asynccontextmanager
    async def call_api(
        self,
        method: str = "GET",
        version: str = "v1",
        base: str = "",
        namespace: str | None = None,
        url: str = "",
        raise_for_status: bool = True,
        stream: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[httpx.Response]:
        parts = [base, version, *(("namespaces", namespace) if namespace else ()), url]
        request = httpx.Request(
            method,
            "https://api.fake" + "/".join(parts),
            params=kwargs.get("params"),
            content=kwargs.get("content"),
            headers=kwargs.get("headers"),
        )
        self.requests.append(request)
        self.streamed.append(stream)
        response = self.handler(request)
        response.request = request
        if raise_for_status:
            response.raise_for_status()
        yield response


def status(code: int, message: str) -> httpx.Response:
    """An error answer with a Kubernetes Status body."""
    return httpx.Response(
        code, json={"kind": "Status", "status": "Failure", "message": message, "code": code}
    )


PLURALS = {
    "Node": "nodes",
    "Pod": "pods",
    "Namespace": "namespaces",
    "NodeGPUs": "nodegpus",
    "Workload": "workloads",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "Topology": "topologies",
    "AdmissionCheck": "admissionchecks",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
}


class FakeCluster:
    """Serves GET lists of ``objects`` at ``v1`` and ``served`` Kueue versions (other versions: 404).

    Label selectors are honoured in their "key exists" form, the one the
    controller uses; list items lose ``kind`` and ``apiVersion`` as on a real
    server.
    """

    def __init__(
        self,
        objects: Iterable[dict[str, Any]],
        *,
        served: tuple[str, ...] = (KUEUE_API,),
        write: Handler | None = None,
    ) -> None:
        self.objects = [dict(o) for o in objects]
        self.served = ("v1", *served)
        self.write = write or (lambda request: httpx.Response(200, json={}))
        """Answers every request other than a GET (the default accepts it)."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return self.write(request)
        parts = request.url.path.strip("/").split("/")
        api_version = parts[1] if parts[0] == "api" else "/".join(parts[1:3])
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = rest[1] if rest[0] == "namespaces" and len(rest) > 2 else None
        plural = rest[-1]
        if api_version not in self.served:
            return status(404, "the server could not find the requested resource")
        selector = request.url.params.get("labelSelector")
        items = [
            {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
            for o in self.objects
            if PLURALS.get(str(o.get("kind"))) == plural
            and (namespace is None or (o.get("metadata") or {}).get("namespace") == namespace)
            and (selector is None or selector in ((o.get("metadata") or {}).get("labels") or {}))
        ]
        body = {
            "apiVersion": api_version,
            "kind": "List",
            "metadata": {"resourceVersion": "1"},
            "items": items,
        }
        return httpx.Response(200, content=json.dumps(body).encode())
