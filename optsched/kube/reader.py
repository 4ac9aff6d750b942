"""Read the objects a snapshot needs from a live cluster, read-only.

Only GET list calls are made (never watch, create or patch), so pointing
``optsched snapshot`` or ``optsched plan --kubeconfig`` at production is safe.
Kueue's API moved from v1beta1 to v1beta2; each Kueue kind is listed at the
newest version the server serves. A cluster without Kueue still yields its
Nodes and Pods, with a note per missing kind.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import httpx

from optsched.errors import InputError
from optsched.kube.documents import KINDS, Kind, items_of

NOT_SERVED = (404,)


class _NotServed(Exception):
    """The server does not serve this kind at any version we know."""


async def _list(api: Any, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
    last_error: Exception | None = None
    for api_version in kind.api_versions():
        base = "/apis" if kind.group else "/api"
        ns = namespace if kind.by_namespace else None
        try:
            async with api.call_api(
                "GET", version=api_version, base=base, namespace=ns, url=kind.plural
            ) as resp:
                body = resp.json()
        except Exception as exc:
            if _status_of(exc) in NOT_SERVED:
                last_error = exc
                continue
            raise
        return items_of(kind, body, api_version)
    raise _NotServed(f"{kind.kind}: not served ({last_error})")


def _status_of(exc: Exception) -> int | None:
    """HTTP status of a kr8s ServerError or httpx error, if any."""
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response):
        return response.status_code
    return None


async def read_cluster(
    kubeconfig: str | None,
    namespace: str | None = None,
    *,
    namespaces: Sequence[str] = (),
    notes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Raw objects of every kind in :data:`KINDS`, cluster facts first.

    ``namespace`` (or several ``namespaces``) restricts the queue (LocalQueues
    and Workloads); Nodes, Pods and cluster-scoped Kueue objects are always
    read whole, because a pod in any namespace holds GPUs the plan must not
    promise twice. Kinds the server does not serve are skipped and named in
    ``notes``. Connection and authentication problems raise
    :class:`~optsched.errors.InputError` naming the kubeconfig.
    """
    import kr8s.asyncio

    scopes: list[str | None] = list(namespaces) or [namespace]
    source = kubeconfig or "the default kubeconfig"
    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise InputError("no such file", source=kubeconfig)
    try:
        api = await kr8s.asyncio.api(kubeconfig=kubeconfig)
    except (httpx.HTTPError, OSError) as exc:
        raise InputError(f"cannot reach the API server: {_one_line(exc)}", source=source) from exc
    except Exception as exc:
        raise InputError(f"cannot load kubeconfig: {_one_line(exc)}", source=source) from exc
    objects: list[dict[str, Any]] = []
    for kind in KINDS:
        for scope in scopes if kind.by_namespace else [None]:
            try:
                objects += await _list(api, kind, scope)
            except _NotServed as exc:
                if notes is not None:
                    notes.append(str(exc))
                break
            except (httpx.HTTPError, OSError) as exc:
                raise InputError(
                    f"cannot reach the API server: {_one_line(exc)}", source=source, obj=kind.kind
                ) from exc
            except Exception as exc:
                if _status_of(exc) is not None:
                    raise InputError(
                        f"API server refused to list {kind.plural}: {_one_line(exc)}",
                        source=source,
                        obj=kind.kind,
                    ) from exc
                raise
    return objects


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def fetch_snapshot_objects(
    kubeconfig: str | None,
    namespace: str | None = None,
    *,
    namespaces: Sequence[str] = (),
    notes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Synchronous :func:`read_cluster` for the CLI."""
    return asyncio.run(read_cluster(kubeconfig, namespace, namespaces=namespaces, notes=notes))
