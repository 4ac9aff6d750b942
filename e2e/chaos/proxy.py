"""The fault proxy between the controller and the API server: plain HTTP in, the real API server out.

The controller's kubeconfig names ``http://127.0.0.1:<port>`` and carries the
controller's own bearer token; the proxy forwards every request, headers and
credentials included, to the real API server over TLS (verifying its CA) and
streams the answer back, watches included, chunk by chunk as they arrive.
While a fault :class:`~e2e.chaos.policy.Mode` is set, each request is first
put to :func:`~e2e.chaos.policy.decide`, which may answer it with an error,
hold it and drop it, close it, or cut a watch stream part-way.

It runs on an asyncio loop in a thread of its own (:class:`LoopThread`), so
the soak's other threads only set the mode and read the counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import threading
from collections import Counter
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import httpx

from e2e.chaos.policy import Action, Decision, Mode, decide

T = TypeVar("T")
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
NO_BODY = frozenset({204, 304})


class LoopThread:
    """An asyncio loop running in a daemon thread; ``call`` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxy", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


class FaultProxy:
    """A reverse proxy to ``upstream`` that injects the faults of its current :attr:`mode`."""

    def __init__(self, upstream: str, verify: ssl.SSLContext | bool, seed: int) -> None:
        self.upstream = upstream.rstrip("/")
        self.verify = verify
        self.mode = Mode()
        self.counts: Counter[str] = Counter()
        self.port = 0
        self._rng = random.Random(f"proxy:{seed}")
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> int:
        self._client = httpx.AsyncClient(
            verify=self.verify, timeout=httpx.Timeout(None, connect=5.0), follow_redirects=False
        )
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        if self._client is not None:
            await self._client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy stops: end this connection quietly (a cancelled handler is logged as an error)
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection is to be closed."""
        head = await reader.readuntil(b"\r\n\r\n")
        line, *rest = head.decode("latin-1").rstrip("\r\n").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = [(k.strip(), v.strip()) for k, v in (h.split(":", 1) for h in rest if ":" in h)]
        body = await _read_body(reader, headers)
        decision = decide(method, target, self.mode, self._rng)
        self.counts[
            decision.action.value if decision.action is not Action.RESPOND else str(decision.status)
        ] += 1
        if decision.action is Action.RESPOND:
            await _respond(writer, decision)
            return True
        if decision.action is Action.DROP:
            return False
        if decision.action is Action.HANG:
            await asyncio.sleep(decision.seconds)
            return False
        cut = decision.seconds if decision.action is Action.CUT else None
        return await self._forward(method, target, headers, body, writer, cut)

    async def _forward(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        writer: asyncio.StreamWriter,
        cut: float | None,
    ) -> bool:
        assert self._client is not None
        sent = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"]
        request = self._client.build_request(method, self.upstream + target, headers=sent, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError:
            self.counts["upstream-unreachable"] += 1
            return False
        try:
            if cut is None:
                return await _relay(response, method, writer)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_relay(response, method, writer), cut)
            return False
        except httpx.HTTPError:
            return False
        finally:
            await response.aclose()


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    values = {k.lower(): v for k, v in headers}
    if "chunked" in values.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return b"".join(chunks)
            chunks.append(chunk[:-2])
    length = int(values.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _respond(writer: asyncio.StreamWriter, decision: Decision) -> None:
    lines = [f"HTTP/1.1 {decision.status} {_reason(decision.status)}"]
    lines += [f"{k}: {v}" for k, v in decision.headers]
    lines.append(f"Content-Length: {len(decision.body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + decision.body)
    await writer.drain()


def _reason(status: int) -> str:
    return {409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error"}.get(status, "Error")


async def _relay(response: httpx.Response, method: str, writer: asyncio.StreamWriter) -> bool:
    """Stream an upstream answer to the client (chunked); True when the connection may be reused."""
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    for key, value in response.headers.multi_items():
        if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
            lines.append(f"{key}: {value}")
    if method == "HEAD" or response.status_code in NO_BODY:
        writer.write(("\r\n".join([*lines, "Content-Length: 0"]) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        return True
    lines.append("Transfer-Encoding: chunked")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    async for chunk in response.aiter_raw():
        if chunk:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True
