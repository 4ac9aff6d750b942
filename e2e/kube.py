"""A small Kubernetes REST client for the e2e harness and tests (httpx only).

Why not the official client: it is a large dependency with slow imports, and
the harness needs a handful of verbs (server-side apply, get, list, delete,
wait) against core and CRD types.  Resource paths come from API discovery, so
CRDs work as soon as they are established.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import yaml

T = TypeVar("T")
Obj = dict[str, Any]
ObjList = list[Obj]
FIELD_MANAGER = "optsched-e2e"


class ApiError(RuntimeError):
    """A non-2xx answer from the API server, with its Status message."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


def load_yaml_docs(source: str | Path | dict[str, Any] | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects from a dict, a list of dicts, YAML text or a YAML file path."""
    if isinstance(source, dict):
        return [source]
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and os.path.exists(source)
    ):
        source = Path(source).read_text()
    docs = [d for d in yaml.safe_load_all(source) if d] if isinstance(source, str) else list(source)
    out: list[dict[str, Any]] = []
    for d in docs:
        if d.get("kind", "").endswith("List") and "items" in d:
            out.extend(d["items"])
        else:
            out.append(d)
    return out


class Kube:
    """Synchronous client bound to one cluster."""

    def __init__(
        self,
        server: str,
        verify: ssl.SSLContext | bool,
        headers: dict[str, str],
        tmpdir: tempfile.TemporaryDirectory[str] | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self._tmpdir = tmpdir
        self.http = httpx.Client(base_url=self.server, verify=verify, headers=headers, timeout=30.0)
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_kubeconfig(cls, path: str | Path, context: str | None = None) -> Kube:
        cfg = yaml.safe_load(Path(path).read_text())
        ctx_name = context or cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next(
            (u["user"] for u in cfg.get("users", []) if u["name"] == ctx.get("user")), {}
        )
        tmp: tempfile.TemporaryDirectory[str] | None = None
        base = Path(path).resolve().parent

        def file_of(key: str) -> str | None:
            nonlocal tmp
            if data := (cluster if key == "certificate-authority" else user).get(f"{key}-data"):
                # ssl wants files; inline credentials (kind's kubeconfig) go to a private temp dir.
                tmp = tmp or tempfile.TemporaryDirectory(prefix="optsched-e2e-kube-")
                f = Path(tmp.name) / key
                f.write_bytes(base64.b64decode(data))
                return str(f)
            src = cluster if key == "certificate-authority" else user
            if value := src.get(key):
                return str(base / value) if not os.path.isabs(value) else value
            return None

        if cluster.get("insecure-skip-tls-verify"):
            sslctx = ssl.create_default_context()
            sslctx.check_hostname = False
            sslctx.verify_mode = ssl.CERT_NONE
        else:
            sslctx = ssl.create_default_context(cafile=file_of("certificate-authority"))
        cert, key = file_of("client-certificate"), file_of("client-key")
        if cert and key:
            sslctx.load_cert_chain(cert, key)
        headers = {"Accept": "application/json"}
        if token := user.get("token"):
            headers["Authorization"] = f"Bearer {token}"
        return cls(cluster["server"], sslctx, headers, tmp)

    def close(self) -> None:
        self.http.close()
        if self._tmpdir:
            self._tmpdir.cleanup()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw ----------------------------------------------------------------------------
    def request(self, method: str, path: str, **kw: Any) -> Any:
        resp = self.http.request(method, path, **kw)
        if resp.status_code >= 400:
            try:
                body = resp.json()
                msg = body.get("message", resp.text)
            except ValueError:
                body, msg = None, resp.text
            raise ApiError(resp.status_code, f"{method} {path}: {msg}", body)
        if not resp.content:
            return None
        ctype = resp.headers.get("content-type", "")
        return resp.json() if "json" in ctype else resp.text

    # -- discovery ------------------------------------------------------------------------
    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(collection path prefix with plural, namespaced) for apiVersion/kind."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            doc = self.request("GET", base)
            for r in doc.get("resources", []):
                if "/" not in r["name"]:
                    self._resources[(api_version, r["kind"])] = (f"{base}/{r['name']}", r["namespaced"])
            if key not in self._resources:
                raise ApiError(404, f"no resource for {api_version} {kind}")
        return self._resources[key]

    def path(
        self,
        api_version: str,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> str:
        prefix, namespaced = self._resource(api_version, kind)
        if namespaced and namespace:
            head, _, plural = prefix.rpartition("/")
            prefix = f"{head}/namespaces/{namespace}/{plural}"
        elif namespaced and name:
            raise ValueError(f"{kind} {name}: namespace required")
        p = prefix + (f"/{name}" if name else "")
        return p + (f"/{subresource}" if subresource else "")

    def obj_path(self, obj: dict[str, Any], with_name: bool = True, subresource: str | None = None) -> str:
        md = obj.get("metadata", {})
        return self.path(
            obj["apiVersion"],
            obj["kind"],
            md.get("name") if with_name else None,
            md.get("namespace"),
            subresource,
        )

    # -- verbs ------------------------------------------------------------------------------
    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            return cast(Obj, self.request("GET", self.path(api_version, kind, name, namespace)))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjList:
        params = {
            k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v
        }
        doc = self.request("GET", self.path(api_version, kind, namespace=namespace), params=params)
        return list(doc.get("items") or [])

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        params = {"dryRun": "All"} if dry_run else {}
        return cast(Obj, self.request("POST", self.obj_path(obj, with_name=False), json=obj, params=params))

    def create_or_replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST, or on conflict PUT the object and (when it has one) its status."""
        try:
            return self.create(obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
        md = obj["metadata"]
        current = self.get(obj["apiVersion"], obj["kind"], md["name"], md.get("namespace")) or {}
        obj = {**obj, "metadata": {**md, "resourceVersion": current["metadata"]["resourceVersion"]}}
        out = self.request("PUT", self.obj_path(obj), json=obj)
        if "status" in obj:
            obj["metadata"]["resourceVersion"] = out["metadata"]["resourceVersion"]
            out = self.request("PUT", self.obj_path(obj, subresource="status"), json=obj)
        return cast(Obj, out)

    def apply(
        self,
        source: str | Path | dict[str, Any] | Iterable[dict[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str = FIELD_MANAGER,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> ObjList:
        """Server-side apply every object in ``source`` (dict, list, YAML text or file)."""
        out = []
        for obj in load_yaml_docs(source):
            if namespace and not obj.get("metadata", {}).get("namespace"):
                obj = {**obj, "metadata": {**obj.get("metadata", {}), "namespace": namespace}}
            _, namespaced = self._resource(obj["apiVersion"], obj["kind"])
            if not namespaced:
                obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "namespace"}}
            params = {"fieldManager": field_manager, "force": "true"}
            if dry_run:
                params["dryRun"] = "All"
            out.append(
                self.request(
                    "PATCH",
                    self.obj_path(obj, subresource=subresource),
                    params=params,
                    # JSON is valid apply-patch YAML and carries its types: a plain YAML
                    # scalar such as 3134e8 would reach the server as a number.
                    content=json.dumps(obj).encode(),
                    headers={"Content-Type": "application/apply-patch+yaml"},
                )
            )
        return out

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch."""
        return cast(
            Obj,
            self.request(
                "PATCH",
                self.path(api_version, kind, name, namespace, subresource),
                json=patch,
                headers={"Content-Type": "application/merge-patch+json"},
            ),
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Background",
    ) -> bool:
        """Delete; False if it was already gone."""
        try:
            self.request(
                "DELETE",
                self.path(api_version, kind, name, namespace),
                json={"propagationPolicy": propagation},
            )
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Poll ``fn`` until it returns something truthy; TimeoutError names ``what``.

    Exceptions from ``fn`` count as "not yet" (the API may be restarting) but the
    last one is reported on timeout, so a real error is not swallowed.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = value
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The status condition of type ``ctype``, or None."""
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c.get("type") == ctype:
            return cast(Obj, c)
    return None


def has_condition(obj: dict[str, Any] | None, ctype: str, status: str = "True") -> bool:
    c = condition(obj, ctype)
    return bool(c and c.get("status") == status)
