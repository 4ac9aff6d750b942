"""Every API call ends: against a local server that accepts connections and never answers.

The client is the real one over kr8s (the transport the controller runs on),
pointed at a plain-HTTP socket server on 127.0.0.1. The server answers
``/version`` (so connecting can succeed) only when told to; every other
request is read and then left without an answer, and a watch gets its
headers and then silence, as a half-open connection looks to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from optsched.errors import InputError
from optsched.kube.client import ApiError, Client

GUARD_S = 30.0
"""A scenario that has not ended by then hangs: it fails instead of blocking the suite."""
VERSION = b'{"major": "1", "minor": "34", "gitVersion": "v1.34.0"}'


class SilentServer:
    """Accepts every connection; answers ``/version`` if ``version`` is set; nothing else, ever."""

    def __init__(self, *, version: bool) -> None:
        self.version = version
        self.requests: list[str] = []
        self.port = 0
        self.connections: list[asyncio.StreamWriter] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode()
                self.requests.append(line)
                path = line.split(" ")[1]
                if self.version and path.startswith("/version"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(VERSION)}\r\n\r\n".encode()
                        + VERSION
                    )
                    await writer.drain()
                    continue
                if "watch=true" in path:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n"
                    )
                    await writer.drain()
                await asyncio.Event().wait()  # never another byte

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SilentServer]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            for writer in self.connections:
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1)


def kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
        encoding="utf-8",
    )
    return str(path)


def test_connecting_to_a_server_that_never_answers_is_an_input_error(tmp_path: Path) -> None:
    async def scenario() -> InputError:
        async with SilentServer(version=False).running() as server:
            with pytest.raises(InputError) as caught:
                await Client.connect(kubeconfig(tmp_path, server.port), request_timeout=0.3)
            assert server.requests and server.requests[0].startswith("GET /version")
            return caught.value

    error = asyncio.run(asyncio.wait_for(scenario(), GUARD_S))
    assert "cannot reach the API server: no answer within 0.3s" in str(error)


def test_a_request_without_an_answer_ends_as_unreachable(tmp_path: Path) -> None:
    async def scenario() -> ApiError:
        async with SilentServer(version=True).running() as server:
            client = await Client.connect(kubeconfig(tmp_path, server.port))
            client.request_timeout = 0.3
            with pytest.raises(ApiError) as caught:
                await client.list("v1", "pods")
            return caught.value

    error = asyncio.run(asyncio.wait_for(scenario(), GUARD_S))
    assert error.unreachable and "no answer from the API server" in error.message


def test_a_watch_on_a_silent_connection_ends_after_its_read_timeout(tmp_path: Path) -> None:
    async def scenario() -> ApiError:
        async with SilentServer(version=True).running() as server:
            client = await Client.connect(kubeconfig(tmp_path, server.port))
            client.request_timeout = 0.2
            with pytest.raises(ApiError) as caught:
                async for _ in client.watch("v1", "pods", resource_version="5", timeout_seconds=1):
                    pass
            assert any("watch=true" in r and "timeoutSeconds=1" in r for r in server.requests)
            return caught.value

    error = asyncio.run(asyncio.wait_for(scenario(), GUARD_S))
    assert error.unreachable and "in time" in error.message
