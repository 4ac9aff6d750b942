"""The fault proxy and the webhook relay on real sockets, against a small fake API server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from e2e.chaos.policy import Fault, Mode
from e2e.chaos.proxy import FaultProxy, LoopThread
from e2e.chaos.relay import Relay

LONG_WATCH = 40
"""Events of a watch that lasts six seconds: longer than the longest cut the proxy draws."""


RELEASE = threading.Event()
"""Set by the test once it has read the first event of a ``hold`` watch."""


class FakeApi(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for n in range(LONG_WATCH if "long" in self.path else 5):
                    self.wfile.write(json.dumps({"type": "ADDED", "object": {"n": n}}).encode() + b"\n")
                    self.wfile.flush()
                    if n == 0 and "hold" in self.path:
                        RELEASE.wait(10)
                    time.sleep(0.15)
            except BrokenPipeError:
                pass
            self.close_connection = True
            return
        self._json(200, {"items": [], "auth": self.headers.get("Authorization"), "path": self.path})

    def do_PATCH(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._json(200, {"patched": json.loads(self.rfile.read(length))})


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    serving = threading.Thread(target=upstream.serve_forever, daemon=True)
    serving.start()
    loop = LoopThread()
    fault_proxy = FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}", False, seed=1)
    loop.call(fault_proxy.start())
    try:
        yield fault_proxy
    finally:
        loop.call(fault_proxy.stop())
        loop.close()
        upstream.shutdown()
        upstream.server_close()


def client(proxy: FaultProxy) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{proxy.port}", timeout=5)


def test_requests_pass_through_with_their_credentials_path_and_body(proxy: FaultProxy) -> None:
    with client(proxy) as http:
        got = http.get("/api/v1/pods?labelSelector=a%3Db", headers={"Authorization": "Bearer t0ken"})
        assert got.status_code == 200
        assert got.json() == {"items": [], "auth": "Bearer t0ken", "path": "/api/v1/pods?labelSelector=a%3Db"}
        patched = http.patch("/api/v1/namespaces/a/pods/p", json={"spec": {"x": 1}})
        assert patched.json() == {"patched": {"spec": {"x": 1}}}
        assert http.get("/api/v1/pods").status_code == 200, "the connection is reused"


def test_a_conflict_mode_answers_writes_409_and_lets_reads_through(proxy: FaultProxy) -> None:
    proxy.mode = Mode(Fault.CONFLICT, 1.0)
    with client(proxy) as http:
        assert http.get("/api/v1/pods").status_code == 200
        answer = http.patch("/api/v1/namespaces/a/pods/p", json={})
        assert answer.status_code == 409 and answer.json()["reason"] == "Conflict"
    proxy.mode = Mode()
    with client(proxy) as http:
        assert http.patch("/api/v1/namespaces/a/pods/p", json={}).status_code == 200
    assert proxy.counts["409"] == 1


def test_a_watch_is_streamed_event_by_event(proxy: FaultProxy) -> None:
    RELEASE.clear()
    with client(proxy) as http, http.stream("GET", "/api/v1/pods?watch=true&hold=1") as response:
        lines = response.iter_lines()
        # The server sends nothing more until the first event has arrived: a proxy that waited for
        # the whole answer would make this read time out.
        assert json.loads(next(lines))["object"] == {"n": 0}
        RELEASE.set()
        assert len([line for line in lines if line]) == 4


def test_dropped_hung_and_cut_requests_end_without_an_answer(proxy: FaultProxy) -> None:
    proxy.mode = Mode(Fault.DROP, 1.0)
    with client(proxy) as http, pytest.raises(httpx.RemoteProtocolError):
        http.get("/api/v1/pods")
    proxy.mode = Mode(Fault.HANG, 1.0, hang_seconds=0.3)
    with client(proxy) as http, pytest.raises(httpx.RemoteProtocolError):
        http.get("/api/v1/pods")
    proxy.mode = Mode(Fault.DROP, 1.0)
    with client(proxy) as http, http.stream("GET", "/api/v1/pods?watch=true&long=1") as response:
        seen = []
        with pytest.raises(httpx.RemoteProtocolError):
            seen.extend(line for line in response.iter_lines() if line)
        assert 0 < len(seen) < LONG_WATCH and proxy.counts["cut"] == 1


def test_the_relay_hands_connections_to_a_living_backend() -> None:
    echo = socket.create_server(("127.0.0.1", 0))
    dead = socket.create_server(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()

    def serve() -> None:
        conn, _ = echo.accept()
        with conn:
            conn.sendall(conn.recv(100).upper())

    threading.Thread(target=serve, daemon=True).start()
    loop = LoopThread()
    relay = Relay()
    relay.backends = [dead_port, echo.getsockname()[1]]
    port = loop.call(relay.start())
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"hello")
            assert conn.recv(100) == b"HELLO"
    finally:
        loop.call(relay.stop())
        loop.close()
        echo.close()
