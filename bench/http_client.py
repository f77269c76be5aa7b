"""A small keep-alive HTTP/1.1 client for the load generator: one request at a time per connection.

aiohttp's client spent about 300 µs of CPU a request in the load generator, twice what a trivial
aiohttp server spent answering it; on two cores shared with the service under test, that CPU was
taken from the service (docs/decisions/0010-load-generator-out-of-the-way.md). This client writes
each request as one buffer and reads the answer by its Content-Length, which the service always
sends; anything else (a chunked body, a closed connection) fails the request with `HttpError`, and
the connection is dropped, never reused.
"""

from __future__ import annotations

import asyncio
import collections
from typing import cast
from urllib.parse import urlsplit


class HttpError(Exception):
    """The connection failed or answered something this client does not read."""


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(HttpError(f"connection lost: {exc!r}"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).split(b"\r\n")
        length = -1
        for line in head[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length < 0:
            self._fail(HttpError("answer without Content-Length"))
            self.close()
            return
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        status = int(head[0].split(b" ", 2)[1])
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((status, body))
        self.waiter = None

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.waiter = None

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Client:
    """Up to `connections` kept-alive connections to one host; requests beyond them wait for one."""

    def __init__(self, base_url: str, connections: int, timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.host_header = parts.netloc.encode()
        self.limit = connections
        self.timeout_s = timeout_s
        self.opened = 0
        self.idle: collections.deque[_Connection] = collections.deque()
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def _acquire(self) -> _Connection:
        loop = asyncio.get_running_loop()
        while True:
            while self.idle:
                connection = self.idle.pop()
                if not connection.closed:
                    return connection
                self.opened -= 1
            if self.opened < self.limit:
                self.opened += 1
                try:
                    _, protocol = await loop.create_connection(_Connection, self.host, self.port)
                except BaseException as exc:
                    self.opened -= 1
                    self._wake()
                    if isinstance(exc, OSError):
                        raise HttpError(f"connect failed: {exc!r}") from exc
                    raise
                return protocol
            waiter: asyncio.Future[None] = loop.create_future()
            self.waiting.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up this waiter can no longer take goes to the next one.
                if waiter.done() and not waiter.cancelled():
                    self._wake()
                raise

    def _release(self, connection: _Connection) -> None:
        if connection.closed:
            self.opened -= 1
        else:
            self.idle.append(connection)
        self._wake()

    def _wake(self) -> None:
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def request(self, method: str, path: str, body: bytes = b"", headers: bytes = b"") -> tuple[int, bytes]:
        """Send one request and return its status and body; `headers` are raw `Name: value\\r\\n` lines.

        The client's timeout covers the wait for a connection too, as aiohttp's `total` does.
        """
        request = b"".join(
            (
                f"{method} {path} HTTP/1.1\r\nHost: ".encode(),
                self.host_header,
                b"\r\n",
                headers,
                b"Content-Length: %d\r\n\r\n" % len(body),
                body,
            )
        )
        async with asyncio.timeout(self.timeout_s):
            connection = await self._acquire()
            try:
                return await connection.send(request)
            except BaseException:
                # Whatever was in flight on it may still arrive; the connection cannot be reused.
                connection.close()
                raise
            finally:
                self._release(connection)

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()
