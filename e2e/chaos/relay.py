"""A TCP relay in front of the controller replicas' webhook ports: what a Service does in a cluster.

The pod-gating webhook is registered once, at the relay's address; every
replica serves it on a port of its own. The relay hands each connection to
the first replica (in a rotating order) that accepts it and pipes bytes both
ways, TLS untouched, so the API server always reaches a living replica, as
it would through the Deployment's Service while replicas die and restart.
"""

from __future__ import annotations

import asyncio
import contextlib


class Relay:
    def __init__(self) -> None:
        self.backends: list[int] = []
        """Ports on 127.0.0.1 to try, set by whoever starts and stops replicas."""
        self.port = 0
        self._next = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        ports = list(self.backends)
        self._next += 1
        for i in range(len(ports)):
            port = ports[(self._next + i) % len(ports)]
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            backend = await self._connect()
            if backend is None:
                return
            up_reader, up_writer = backend
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except asyncio.CancelledError:
            pass  # the relay stops: end this connection quietly (a cancelled handler is logged as an error)
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
