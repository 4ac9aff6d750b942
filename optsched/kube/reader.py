"""Read the objects a snapshot needs from a live cluster, read-only.

Only GET list calls are made (never watch, create or patch), so pointing
``optsched snapshot`` or ``optsched plan --kubeconfig`` at production is safe.
Lists come in pages of :data:`PAGE_SIZE`, so no single answer (each bounded by
the client's request timeout) has to carry a whole large cluster.
Kueue's API moved from v1beta1 to v1beta2; each Kueue kind is listed at the
newest version the server serves. A cluster without Kueue still yields its
Nodes and Pods, with a note per missing kind; one without the ``NodeGPUs``
CRD (no node agents) is normal and gets no note. The controller reads the
same kinds through informers instead (``optsched.kube.cluster_cache``), which
list once and then watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple

from optsched.errors import InputError
from optsched.kube.client import ApiError, Client
from optsched.kube.documents import KINDS, Kind, items_of

PAGE_SIZE = 500
"""Objects per list request (``limit``); the rest follows with the server's ``continue`` token."""


class Listing(NamedTuple):
    """What one read returned: the objects, cluster facts first, and what could not be read."""

    objects: list[dict[str, Any]]
    notes: tuple[str, ...] = ()
    """One line per kind the server does not serve at any version we know."""


class _NotServed(Exception):
    """The server does not serve this kind at any version we know."""


async def _list(client: Client, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
    """The items of one kind, at the newest version served (404 means: try the next one)."""
    last: ApiError | None = None
    for api_version in kind.api_versions():
        try:
            return await _pages(client, kind, namespace, api_version)
        except ApiError as exc:
            if exc.not_found:
                last = exc
                continue
            raise
    raise _NotServed(f"{kind.kind}: not served ({last})")


async def _pages(client: Client, kind: Kind, namespace: str | None, api_version: str) -> list[dict[str, Any]]:
    """Every item of one kind at one version, page by page."""
    params = {"limit": str(PAGE_SIZE)}
    items: list[dict[str, Any]] = []
    while True:
        body = await client.request("GET", api_version, kind.plural, namespace=namespace, params=params)
        items += items_of(kind, body, api_version)
        token = (
            (body.get("metadata") or {}).get("continue") if isinstance(body.get("metadata"), dict) else None
        )
        if not token:
            return items
        params["continue"] = str(token)


async def read_cluster(
    client: Client, namespace: str | None = None, *, namespaces: Sequence[str] = ()
) -> Listing:
    """Raw objects of every kind in :data:`KINDS`, cluster facts first, and notes on missing kinds.

    ``namespace`` (or several ``namespaces``) restricts the queue (LocalQueues
    and Workloads); Nodes, Pods, Namespaces and cluster-scoped Kueue objects
    are always read whole, because a pod in any namespace holds GPUs the plan
    must not promise twice. Connection and authentication problems raise
    :class:`~optsched.errors.InputError` naming the client's kubeconfig; a
    refused list of an optional kind (Namespaces, read for ClusterQueue
    namespace selectors; NodeGPUs, whose nodes then read their annotation) is
    only a note.
    """
    scopes: list[str | None] = list(namespaces) or [namespace]
    objects: list[dict[str, Any]] = []
    notes: list[str] = []
    for kind in KINDS:
        for scope in scopes if kind.by_namespace else [None]:
            try:
                objects += await _list(client, kind, scope)
            except _NotServed as exc:
                if not kind.quiet_if_absent:
                    notes.append(str(exc))
                break
            except ApiError as exc:
                if kind.optional and exc.status == 403:
                    notes.append(f"{kind.kind}: not readable ({exc.message}); not checked")
                    break
                what = exc.message if exc.unreachable else f"API server refused to list {kind.plural}: {exc}"
                raise InputError(what, source=client.source, obj=kind.kind) from exc
    return Listing(objects, tuple(notes))


def fetch_snapshot_objects(
    kubeconfig: str | None, namespace: str | None = None, *, namespaces: Sequence[str] = ()
) -> Listing:
    """:func:`read_cluster` for the CLI: connect through ``kubeconfig``, read, return."""

    async def fetch() -> Listing:
        client = await Client.connect(kubeconfig)
        return await read_cluster(client, namespace, namespaces=namespaces)

    return asyncio.run(fetch())
