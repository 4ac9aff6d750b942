"""Who may scrape ``/metrics``: the bearer token is authenticated and its user authorized by the API server.

As controller-runtime's secure metrics do: the token of each scrape goes to
a TokenReview; the user it names must be allowed ``get`` on the
non-resource URL ``/metrics`` by a SubjectAccessReview (the shipped
ClusterRole ``optsched-metrics-reader`` grants that, for Prometheus to bind).
No token is 401, a token the API server does not accept is 401, a user
without the permission is 403, and an API server that cannot be asked is
503 (never remembered). Answers are remembered for ``ttl_s`` seconds, keyed
by a digest of the token (the token itself is not kept), in a cache of at
most ``max_entries``, so a scrape every few seconds costs two reviews per
minute, not two per scrape.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optsched.kube.client import ApiError, Client

TOKEN_REVIEW_API = "authentication.k8s.io/v1"
ACCESS_REVIEW_API = "authorization.k8s.io/v1"
METRICS_PATH = "/metrics"


@dataclass(frozen=True)
class Verdict:
    """The answer to one scrape: 200 to serve it, else the status and why."""

    status: int
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None without one."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _access_review(user: dict[str, Any]) -> dict[str, Any]:
    """A SubjectAccessReview: may this user ``get`` the non-resource URL ``/metrics``?"""
    spec: dict[str, Any] = {
        "user": str(user.get("username") or ""),
        "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"},
    }
    for key in ("uid", "groups", "extra"):
        if user.get(key):
            spec[key] = user[key]
    return {"apiVersion": ACCESS_REVIEW_API, "kind": "SubjectAccessReview", "spec": spec}


class ScrapeAuth:
    """TokenReview then SubjectAccessReview per token, remembered for a short time."""

    def __init__(
        self,
        client: Client,
        *,
        ttl_s: float = 60.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._known: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()

    async def verdict(self, token: str | None) -> Verdict:
        """May the holder of ``token`` read ``/metrics``?"""
        if not token:
            return Verdict(401, "a bearer token is required")
        key = hashlib.sha256(token.encode()).hexdigest()
        known = self._known.get(key)
        if known is not None and known[0] > self.clock():
            self._known.move_to_end(key)
            return known[1]
        try:
            verdict = await self._review(token)
        except ApiError as exc:
            return Verdict(503, f"cannot check the token with the API server: {exc}")
        self._known[key] = (self.clock() + self.ttl_s, verdict)
        self._known.move_to_end(key)
        while len(self._known) > self.max_entries:
            self._known.popitem(last=False)
        return verdict

    async def _review(self, token: str) -> Verdict:
        review = await self.client.create(
            TOKEN_REVIEW_API,
            "tokenreviews",
            {"apiVersion": TOKEN_REVIEW_API, "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") if isinstance(review.get("status"), dict) else {}
        if not (status or {}).get("authenticated"):
            error = (status or {}).get("error")
            return Verdict(401, f"token not accepted{': ' + str(error) if error else ''}")
        user = (status or {}).get("user")
        user = user if isinstance(user, dict) else {}
        access = await self.client.create(ACCESS_REVIEW_API, "subjectaccessreviews", _access_review(user))
        result = access.get("status") if isinstance(access.get("status"), dict) else {}
        if (result or {}).get("allowed") is True:
            return Verdict(200)
        name = user.get("username") or "the token's user"
        return Verdict(403, f"{name} may not get {METRICS_PATH}")

    @property
    def remembered(self) -> int:
        """Verdicts held (at most ``max_entries``)."""
        return len(self._known)
