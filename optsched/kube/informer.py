"""A cache of one kind of object, kept current by one LIST and then a WATCH, instead of a LIST per cycle.

Like client-go's informers: the kind is listed once, in pages, at the newest
API version the server serves; then watched from the list's resourceVersion.
Objects are kept by uid, each in the form a reader needs (``kind`` and
``apiVersion`` set, ``managedFields`` dropped, and a per-kind ``transform``
such as :func:`optsched.kube.slim.slim_pod`). Every change is handed to
``on_change`` as a watch event (``{"type", "object"}``), so the controller's
triggers work off the same stream as the cache.

When the stream ends normally (its ``timeoutSeconds``), the watch resumes from
the last version seen. When the server no longer has that version (410 Gone)
or the stream breaks (no answer in time, a transport error, an ``ERROR``
event), the kind is listed again, after a backoff that grows with each
failure in a row; the relist is compared with the cache and the differences
are handed on as ADDED, MODIFIED and DELETED events, so nothing that changed
while the stream was down is missed. A kind the server does not serve (or, for
an ``optional`` one, refuses to list) leaves the cache empty but synced, with
a ``note``, and is looked for again every ``rediscover_s`` seconds.

Objects in the cache are shared with its readers: they must not be changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from optsched.kube.client import ApiError, Client, Object
from optsched.kube.documents import clean_item

log = logging.getLogger("optsched.informer")

Change = Mapping[str, Any]
"""``{"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}``, as a watch sends it."""
OnChange = Callable[[Change], None]
Transform = Callable[[Object], Object]
CHANGES = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True)
class Source:
    """What one informer lists and watches."""

    kind: str
    plural: str
    api_versions: tuple[str, ...]
    """Tried in order, newest first; the first one the server serves is used."""
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    """An object that stops matching it arrives as DELETED (for pods: one that finished)."""
    optional: bool = False
    """A refused list (403) is a note and an empty cache, not a failure."""

    def __str__(self) -> str:
        return f"{self.plural} in {self.namespace}" if self.namespace else self.plural


@dataclass(frozen=True)
class Timing:
    """How an informer pages, watches and backs off."""

    page_size: int = 500
    """Objects per LIST page (``limit``), so no single answer holds a whole large cluster."""
    watch_timeout_s: int = 300
    """``timeoutSeconds`` of each watch: the server ends the stream then, and the watch resumes."""
    backoff_s: float = 1.0
    """Wait before listing again after the first failure in a row; doubled per further failure."""
    max_backoff_s: float = 30.0
    rediscover_s: float = 60.0
    """How often a kind that is not served (or refused, if optional) is looked for again."""


DEFAULT_TIMING = Timing()


class _Gone(Exception):
    """The server no longer has the version the watch resumes from (410): list again."""


class _Absent(Exception):
    """The kind is not served, or refused where that is allowed: the cache is empty on purpose."""


def key_of(obj: Mapping[str, Any]) -> str:
    """The cache key: the uid, else ``namespace/name`` (objects written by hand may lack a uid)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    uid = (meta or {}).get("uid")
    if uid:
        return str(uid)
    return f"{(meta or {}).get('namespace') or ''}/{(meta or {}).get('name') or ''}"


def _version_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return str((meta or {}).get("resourceVersion") or "")


class Informer:
    """One kind's cache: :meth:`run` keeps it current until cancelled; :attr:`synced` once it was listed."""

    def __init__(
        self,
        client: Client,
        source: Source,
        *,
        transform: Transform | None = None,
        on_change: OnChange | None = None,
        timing: Timing = DEFAULT_TIMING,
    ) -> None:
        self.client = client
        self.source = source
        self.transform = transform
        self.on_change = on_change
        self.timing = timing
        self.synced = asyncio.Event()
        """Set once the kind was listed (or found absent); stays set while a relist is due."""
        self.api_version: str | None = None
        self.note: str | None = None
        """Why the cache is empty on purpose (kind not served, or refused where that is allowed)."""
        self.error: str | None = None
        """The last failure to list or watch, until the next successful list."""
        self.lists = 0
        """Successful lists so far (the first one included)."""
        self._items: dict[str, Object] = {}
        self._version = ""

    def items(self) -> list[Object]:
        """The cached objects (shared: do not change them)."""
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    # -- running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch; list again on 410 or a broken stream, with backoff; until cancelled."""
        failures = 0
        while True:
            try:
                await self._list()
                while True:
                    if await self._watch():
                        failures = 0
                    else:  # ended with nothing in it: a quiet kind, or a server that ends streams at once
                        await asyncio.sleep(self.timing.backoff_s)
            except _Gone:
                delay = 0.0 if failures == 0 else self._backoff(failures)
                log.debug("%s: resource version gone, listing again", self.source)
            except _Absent:
                delay = self.timing.rediscover_s
            except ApiError as exc:
                self.error = str(exc)
                delay = self._backoff(failures)
                log.debug("%s: %s; listing again in %.1fs", self.source, exc, delay)
            except Exception as exc:  # a bug must not end the cache for good: log it and start over
                self.error = str(exc)
                delay = self._backoff(failures)
                log.exception("%s: informer failed; listing again in %.1fs", self.source, delay)
            failures += 1
            await asyncio.sleep(delay)

    async def list_once(self) -> None:
        """List the kind now, replacing the cache, for a read that runs once: no watch, no events.

        A kind that is absent on purpose leaves a :attr:`note`; any other
        failure raises :class:`ApiError`.
        """
        with contextlib.suppress(_Absent):
            await self._list(hand_on=False)

    def _backoff(self, failures: int) -> float:
        return float(min(self.timing.max_backoff_s, self.timing.backoff_s * 2 ** max(0, failures - 1)))

    # -- list --------------------------------------------------------------------------------------

    async def _list(self, *, hand_on: bool = True) -> None:
        """Every object, at the newest version served; the differences from the cache handed on."""
        last: ApiError | None = None
        for api_version in self.source.api_versions:
            try:
                items, version = await self._pages(api_version)
            except ApiError as exc:
                if exc.not_found:
                    last = exc
                    continue
                if exc.status == 403 and self.source.optional:
                    self._absent(f"{self.source.kind}: not readable ({exc.message}); not checked", hand_on)
                raise
            self.api_version = api_version
            self._replace(items, version, hand_on)
            return
        self._absent(f"{self.source.kind}: not served ({last})", hand_on)

    async def _pages(self, api_version: str) -> tuple[list[Object], str]:
        params = {"limit": str(self.timing.page_size)}
        if self.source.label_selector:
            params["labelSelector"] = self.source.label_selector
        if self.source.field_selector:
            params["fieldSelector"] = self.source.field_selector
        items: list[Object] = []
        version = ""
        while True:
            body = await self.client.request(
                "GET", api_version, self.source.plural, namespace=self.source.namespace, params=params
            )
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            version = str((meta or {}).get("resourceVersion") or version)
            listed_as = str(body.get("apiVersion") or api_version)
            items += [self._stored(i, listed_as) for i in body.get("items") or () if isinstance(i, dict)]
            token = (meta or {}).get("continue")
            if not token:
                return items, version
            params["continue"] = str(token)

    def _absent(self, note: str, hand_on: bool) -> NoReturn:
        """The kind is not there to read: an empty cache, synced, and the reason."""
        self._replace([], "", hand_on)
        self.note = note
        raise _Absent(note)

    def _replace(self, items: list[Object], version: str, hand_on: bool) -> None:
        old, fresh = self._items, {key_of(obj): obj for obj in items}
        self._items, self._version = fresh, version
        self.lists += 1
        self.error = self.note = None
        self.synced.set()
        if not hand_on:
            return
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self._emit("ADDED", obj)
            elif _version_of(before) != _version_of(obj) or not _version_of(obj):
                self._emit("MODIFIED", obj)
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj)

    # -- watch -------------------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """One watch stream from the cache's version, until the server ends it; True if it carried events.

        The stream is bounded: the server ends it after ``watch_timeout_s``, and
        the client's read timeout ends a stream that went silent past that.
        """
        assert self.api_version is not None
        carried = False
        try:
            async for event in self.client.watch(
                self.api_version,
                self.source.plural,
                namespace=self.source.namespace,
                label_selector=self.source.label_selector,
                field_selector=self.source.field_selector,
                resource_version=self._version,
                timeout_seconds=self.timing.watch_timeout_s,
            ):
                carried = self._event(event) or carried
        except ApiError as exc:
            if exc.status == 410:
                raise _Gone from exc
            raise
        return carried

    def _event(self, event: Mapping[str, Any]) -> bool:
        """Apply one watch event to the cache; True if it was a change or a bookmark."""
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            return False
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone
            raise ApiError(code if isinstance(code, int) else 0, str(obj.get("message") or "watch error"))
        if kind == "BOOKMARK":
            self._version = _version_of(obj) or self._version
            return True
        if kind not in CHANGES:
            return False
        stored = self._stored(obj, str(obj.get("apiVersion") or self.api_version))
        key = key_of(stored)
        if kind == "DELETED":
            self._items.pop(key, None)
        else:
            self._items[key] = stored
        self._version = _version_of(stored) or self._version
        self._emit(str(kind), stored)
        return True

    def _stored(self, obj: Object, api_version: str) -> Object:
        """The form kept in the cache: kind and apiVersion set, managedFields dropped, transformed."""
        clean = clean_item(obj, kind=self.source.kind, api_version=api_version)
        return self.transform(clean) if self.transform is not None else clean

    def _emit(self, kind: str, obj: Object) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change({"type": kind, "object": obj})
        except Exception:  # a failing handler must not stop the cache
            log.exception("%s: handler failed on a %s event", self.source, kind)
