"""The metrics endpoint: HTTPS scrapes reviewed by the API server (TokenReview, SAR); /healthz open."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from optsched.controller.certs import generate
from optsched.controller.health import Heartbeat
from optsched.controller.metrics import Metrics
from optsched.controller.metrics_server import MetricsServer, Tls, on_loop, serving_tls
from optsched.controller.scrape_auth import ScrapeAuth
from optsched.errors import InputError
from optsched.kube.client import Client
from tests.kube.fake import FakeTransport, status

USERS = {"prom-token": "system:serviceaccount:monitoring:prometheus", "dev-token": "alice"}
ALLOWED = {"system:serviceaccount:monitoring:prometheus"}


class ReviewingApi:
    """Answers TokenReviews for :data:`USERS` and SubjectAccessReviews for :data:`ALLOWED`."""

    def __init__(self) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.down = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            return status(503, "etcd leader changed")
        body = json.loads(request.content)
        self.reviews.append(body)
        if request.url.path.endswith("/tokenreviews"):
            user = USERS.get(body["spec"]["token"])
            answer = {"authenticated": True, "user": {"username": user, "groups": ["g"]}} if user else {}
            return httpx.Response(201, json={**body, "status": answer})
        allowed = body["spec"]["user"] in ALLOWED
        assert body["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return httpx.Response(201, json={**body, "status": {"allowed": allowed}})


def serving(tmp_path: Path) -> tuple[Tls, ssl.SSLContext]:
    material = generate(["localhost"])
    cert, key = material.write(str(tmp_path))
    trust = ssl.create_default_context(cadata=material.ca_pem.decode())
    return Tls(cert, key), trust


def scrape(
    tmp_path: Path,
    requests: Callable[[Callable[..., httpx.Response], MetricsServer], Any],
    *,
    api: ReviewingApi | None = None,
    heartbeat: Heartbeat | None = None,
    secure: bool = True,
    auth: ScrapeAuth | None = None,
) -> Any:
    """Serve metrics (secure: reviewed through ``api``) and run ``requests`` against it from a thread."""
    tls, trust = serving(tmp_path)
    metrics = Metrics()
    metrics.admitted.inc()

    async def scenario() -> Any:
        reviewer = auth if auth is not None else ScrapeAuth(Client(FakeTransport(api or ReviewingApi())))
        server = MetricsServer(
            metrics.registry,
            (heartbeat or Heartbeat(60.0)).health,
            host="127.0.0.1",
            port=0,
            tls=tls if secure else None,
            authorize=on_loop(reviewer, asyncio.get_running_loop()) if secure else None,
        )
        server.start()
        scheme = "https" if secure else "http"
        try:
            with httpx.Client(verify=trust, timeout=10) as http:

                def get(path: str, token: str | None = None) -> httpx.Response:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    return http.get(f"{scheme}://127.0.0.1:{server.port}{path}", headers=headers)

                return await asyncio.to_thread(requests, get, server)
        finally:
            server.stop()

    return asyncio.run(scenario())


def test_scrapes_need_a_token_the_api_server_accepts_and_authorizes(tmp_path: Path) -> None:
    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> list[int]:
        return [get("/metrics").status_code, get("/metrics", "stolen").status_code]

    assert scrape(tmp_path, requests) == [401, 401]

    def denied(get: Callable[..., httpx.Response], server: MetricsServer) -> tuple[int, str]:
        answer = get("/metrics", "dev-token")
        return answer.status_code, answer.text

    assert scrape(tmp_path, denied) == (403, "alice may not get /metrics\n")

    def allowed(get: Callable[..., httpx.Response], server: MetricsServer) -> tuple[int, str]:
        answer = get("/metrics", "prom-token")
        return answer.status_code, answer.text

    code, text = scrape(tmp_path, allowed)
    assert code == 200 and "optsched_workloads_admitted_total 1.0" in text


def test_healthz_needs_no_token_and_turns_red_when_the_loop_is_silent(tmp_path: Path) -> None:
    now = [0.0]
    heartbeat = Heartbeat(30.0, clock=lambda: now[0])

    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> list[tuple[int, str]]:
        green = get("/healthz")
        now[0] = 31.0
        red = get("/healthz")
        heartbeat.beat()
        again = get("/healthz")
        return [(r.status_code, r.text.split(" (")[0]) for r in (green, red, again)]

    assert scrape(tmp_path, requests, heartbeat=heartbeat) == [
        (200, "ok\n"),
        (500, "no progress for 31s"),
        (200, "ok\n"),
    ]


def test_verdicts_are_remembered_for_a_while_in_a_bounded_cache(tmp_path: Path) -> None:
    api = ReviewingApi()
    clock = [0.0]
    auth = ScrapeAuth(Client(FakeTransport(api)), ttl_s=60, max_entries=2, clock=lambda: clock[0])

    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> list[int]:
        codes = [get("/metrics", "prom-token").status_code for _ in range(3)]
        reviews_after_three = len(api.reviews)
        codes += [get("/metrics", t).status_code for t in ("dev-token", "stolen", "other")]
        clock[0] = 61.0
        codes.append(get("/metrics", "prom-token").status_code)
        return [reviews_after_three, auth.remembered, *codes]

    reviews, cached, *codes = scrape(tmp_path, requests, api=api, auth=auth)
    assert reviews == 2  # one TokenReview and one SubjectAccessReview for three scrapes
    assert cached == 2 and auth.remembered == 2
    assert codes == [200, 200, 200, 403, 401, 401, 200]


def test_an_api_server_that_cannot_be_asked_gives_503_and_nothing_is_remembered(tmp_path: Path) -> None:
    api = ReviewingApi()
    api.down = True
    auth = ScrapeAuth(Client(FakeTransport(api)))

    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> list[int]:
        first = get("/metrics", "prom-token").status_code
        api.down = False
        return [first, get("/metrics", "prom-token").status_code]

    assert scrape(tmp_path, requests, api=api, auth=auth) == [503, 200]


def test_an_idle_connection_does_not_stall_the_probes_of_others(tmp_path: Path) -> None:
    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> int:
        with socket.create_connection(("127.0.0.1", server.port)):  # connects, never says hello
            return get("/healthz").status_code

    assert scrape(tmp_path, requests) == 200


def test_plain_mode_serves_metrics_without_review(tmp_path: Path) -> None:
    def requests(get: Callable[..., httpx.Response], server: MetricsServer) -> list[int]:
        return [get("/metrics").status_code, get("/healthz").status_code, get("/other").status_code]

    assert scrape(tmp_path, requests, secure=False) == [200, 200, 404]


def test_a_cert_dir_without_its_files_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        serving_tls(str(tmp_path))
    assert str(tmp_path / "tls.crt") in str(caught.value)
