"""A fake API server that lists in pages and streams watches, for the informers and the controller loop.

Objects live in a store with a cluster-wide resourceVersion; every change is
kept in a history and sent to the open watch streams that match it (kind,
namespace, the pod phase field selector; an object that stops matching is
sent as DELETED, as the API server does). Tests change the store with
:meth:`FakeServer.add`, :meth:`FakeServer.modify`, :meth:`FakeServer.delete`,
drop the history (:meth:`FakeServer.compact`: a watch from an older version
gets 410 Gone) and break open streams (:meth:`FakeServer.break_watches`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from optsched.model.names import KUEUE_API
from tests.kube.fake import PLURALS, status

Key = tuple[str, str, str]


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (PLURALS[obj["kind"]], str(meta.get("namespace") or ""), str(meta["name"]))


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    """The ``status.phase!=X`` terms of a field selector (the only form the controller sends)."""
    if not selector:
        return True
    phase = (obj.get("status") or {}).get("phase")
    return all(phase != term.split("!=", 1)[1] for term in selector.split(",") if "!=" in term)


class _Watch:
    def __init__(self, plural: str, namespace: str | None, selector: str | None) -> None:
        self.plural, self.namespace, self.selector = plural, namespace, selector
        self.queue: asyncio.Queue[bytes | Exception | None] = asyncio.Queue()

    def wants(self, key: Key) -> bool:
        return key[0] == self.plural and (self.namespace is None or key[1] == self.namespace)


class FakeServer:
    def __init__(
        self, objects: Iterable[dict[str, Any]] = (), *, served: tuple[str, ...] = (KUEUE_API,)
    ) -> None:
        self.served = ("v1", *served)
        self.version = 0
        self.store: dict[Key, dict[str, Any]] = {}
        self.history: list[tuple[int, str, Key, dict[str, Any], dict[str, Any] | None]] = []
        self.compacted = 0
        self.gone = 0
        """Watches answered 410 Gone so far."""
        self.watches: list[_Watch] = []
        self.requests: list[httpx.Request] = []
        for obj in objects:
            self.add(obj)

    # -- changing the store ------------------------------------------------------------------------

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    def _record(self, kind: str, key: Key, obj: dict[str, Any], before: dict[str, Any] | None) -> None:
        self.history.append((self.version, kind, key, obj, before))
        for watch in self.watches:
            line = self._line(watch, kind, key, obj, before)
            if line is not None:
                watch.queue.put_nowait(line)

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = self._bump(obj)
        self.store[_key(stored)] = stored
        self._record("ADDED", _key(stored), stored, None)
        return stored

    def modify(self, obj: dict[str, Any]) -> dict[str, Any]:
        before = self.store[_key(obj)]
        stored = self._bump(obj)
        self.store[_key(stored)] = stored
        self._record("MODIFIED", _key(stored), stored, before)
        return stored

    def delete(self, obj: dict[str, Any]) -> None:
        before = self.store.pop(_key(obj))
        gone = self._bump(before)
        self._record("DELETED", _key(gone), gone, before)

    def compact(self) -> None:
        """Forget the history: a watch from any version seen so far is answered 410 Gone."""
        self.compacted = self.version + 1
        self.history.clear()

    def end_watches(self) -> None:
        """Every open stream ends normally, as at its ``timeoutSeconds``."""
        for watch in self.watches:
            watch.queue.put_nowait(None)
        self.watches.clear()

    def break_watches(self) -> None:
        """Every open stream ends with a transport error, as a dropped connection does."""
        for watch in self.watches:
            watch.queue.put_nowait(httpx.ReadError("connection reset by peer"))
        self.watches.clear()

    # -- serving -----------------------------------------------------------------------------------

    def _line(
        self, watch: _Watch, kind: str, key: Key, obj: dict[str, Any], before: dict[str, Any] | None
    ) -> bytes | None:
        if not watch.wants(key):
            return None
        now, then = _matches(obj, watch.selector), before is not None and _matches(before, watch.selector)
        if kind == "DELETED":
            kind = "DELETED" if then else ""
        elif now and not then:
            kind = "ADDED"
        elif then and not now:
            kind = "DELETED"
        elif not now:
            kind = ""
        return (json.dumps({"type": kind, "object": obj}) + "\n").encode() if kind else None

    def _list(
        self, request: httpx.Request, plural: str, namespace: str | None, api_version: str
    ) -> httpx.Response:
        selector = request.url.params.get("fieldSelector")
        items = [
            {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
            for key, o in sorted(self.store.items())
            if key[0] == plural and (namespace is None or key[1] == namespace) and _matches(o, selector)
        ]
        start = int(request.url.params.get("continue") or 0)
        limit = int(request.url.params.get("limit") or len(items) or 1)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.version)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = {"apiVersion": api_version, "kind": "List", "metadata": meta, "items": page}
        return httpx.Response(200, content=json.dumps(body).encode())

    def _watch(self, request: httpx.Request, plural: str, namespace: str | None) -> httpx.Response:
        since = int(request.url.params.get("resourceVersion") or self.version)
        watch = _Watch(plural, namespace, request.url.params.get("fieldSelector"))
        if since < self.compacted:
            self.gone += 1
            gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
            watch.queue.put_nowait((json.dumps({"type": "ERROR", "object": gone}) + "\n").encode())
            watch.queue.put_nowait(None)
        else:
            for version, kind, key, obj, before in self.history:
                line = self._line(watch, kind, key, obj, before) if version > since else None
                if line is not None:
                    watch.queue.put_nowait(line)
            self.watches.append(watch)

        async def stream() -> AsyncIterator[bytes]:
            while True:
                item = await watch.queue.get()
                if item is None:
                    return
                if isinstance(item, Exception):
                    raise item
                yield item

        return httpx.Response(200, content=stream())

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
        request = httpx.Request(method, "https://api.fake" + "/".join(parts), params=kwargs.get("params"))
        self.requests.append(request)
        if version not in self.served:
            response = status(404, "the server could not find the requested resource")
        elif method != "GET":
            response = httpx.Response(200, json={})
        elif request.url.params.get("watch") == "true":
            response = self._watch(request, url, namespace)
        else:
            response = self._list(request, url, namespace, version)
        response.request = request
        if raise_for_status:
            response.raise_for_status()
        yield response

    def lists(self, plural: str) -> int:
        """LIST requests made for ``plural`` so far (pages counted one by one)."""
        return sum(
            1
            for r in self.requests
            if r.url.path.endswith("/" + plural) and r.url.params.get("watch") != "true"
        )
