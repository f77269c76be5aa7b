"""Request/reply: the edge's own correlation ids, answered over TCP or on the replies topic.

Workers answer straight to the asking edge over a TCP listener whose address rides in the request's
headers: one hop fewer than a topic, and no polling. When a worker cannot reach it, the answer goes
to the replies topic instead: each edge reads one replies partition with a group-less consumer (no
slow group join) and keeps only the replies addressed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import uuid
from typing import Any

import orjson
from aiokafka import TopicPartition

from infra import frames
from infra.kafka import make_consumer
from infra.settings import Settings

log = logging.getLogger(__name__)


HELLO_TIMEOUT_S = 2.0


def reply_bind(settings: Settings) -> str:
    """Where the reply listener binds: loopback or a private address, never a public or wildcard one."""
    chosen = settings.reply_bind or (settings.host if private(settings.host) else "127.0.0.1")
    if not private(chosen):
        raise ValueError(f"reply_bind must be a loopback or private address, not {chosen!r}")
    return chosen


def private(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    return address.is_loopback or (address.is_private and not address.is_unspecified)


class ReplyRouter:
    def __init__(self, settings: Settings, partition: int) -> None:
        self.topic = settings.topic("replies")
        self.partition = partition
        self.edge_id = uuid.uuid4().hex[:12]
        # With direct replies the topic is only the fallback: poll it like a follower, not the answer path.
        self.consumer = make_consumer(settings, follower=settings.direct_replies)
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.direct = settings.direct_replies
        self.listen_host = reply_bind(settings)
        self.token = settings.reply_token
        self.advertised_host = settings.reply_host or (
            socket.gethostname() if settings.host in ("0.0.0.0", "::", "") else settings.host
        )
        self.server: asyncio.Server | None = None
        self.reply_to = b""
        self._connections: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}

    async def start(self) -> None:
        if self.direct and self.token:
            self.server = await asyncio.start_server(self._serve_worker, self.listen_host, 0)
            port = self.server.sockets[0].getsockname()[1]
            self.reply_to = f"{self.advertised_host}:{port}".encode()
        await self.consumer.start()
        tp = TopicPartition(self.topic, self.partition)
        self.consumer.assign([tp])
        await self.consumer.seek_to_end(tp)
        await self.consumer.position(tp)
        self._task = asyncio.create_task(self._run(), name="replies")

    def expect(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A new correlation id and the future its reply will resolve."""
        corr = f"{self.edge_id}.{uuid.uuid4().hex}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[corr] = future
        return corr, future

    def forget(self, corr: str) -> None:
        self.pending.pop(corr, None)

    def headers(self, corr: str) -> list[tuple[str, bytes]]:
        headers = [("reply-partition", str(self.partition).encode()), ("corr", corr.encode())]
        if self.reply_to:
            headers.append(("reply-to", self.reply_to))
        return headers

    def _resolve(self, corr: str, reply: dict[str, Any]) -> None:
        future = self.pending.pop(corr, None)
        if future is not None and not future.done():
            future.set_result(reply)

    async def _serve_worker(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One worker's connection: a stream of answers, each resolving the request it names."""
        task = asyncio.current_task()
        if task is not None:
            self._connections[task] = writer
        try:
            if not frames.greets(await asyncio.wait_for(frames.read(reader), HELLO_TIMEOUT_S), self.token):
                log.warning("a reply connection without the shared token; closed")
                return
            while True:
                message = await frames.read(reader)
                self._resolve(str(message["corr"]), {"status": message["status"], "body": message["body"]})
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, frames.FrameTooLarge, ValueError):
            pass
        finally:
            if task is not None:
                self._connections.pop(task, None)
            writer.close()

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=1000)
            for messages in batches.values():
                for message in messages:
                    self._resolve(message.key.decode() if message.key else "", orjson.loads(message.value))

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            # Close the workers' connections so their handlers end on a short read. Cancelling a
            # handler instead makes asyncio's stream callback log the CancelledError as an error.
            for writer in self._connections.values():
                writer.close()
            if self._connections:
                await asyncio.wait(list(self._connections), timeout=1.0)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()
