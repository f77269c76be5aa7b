"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts, parsed by the `email`
package. Recipients pick its behaviour: `refuse@…` gets 550 for the message, `hang@…` no answer for a
minute, `hold@…` an answer once `release` is set; everyone else 250."""

from __future__ import annotations

import asyncio
import contextlib
import email
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import default
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

HANG_S = 60.0


@dataclass
class Mail:
    to: list[str]
    message: EmailMessage


@dataclass
class SmtpServer:
    url: str = ""
    received: list[Mail] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        to = [str(address) for address in envelope.rcpt_tos]
        if any(address.startswith("refuse@") for address in to):
            return "550 5.7.1 Message refused by policy"
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw, policy=default)
        assert isinstance(parsed, EmailMessage)
        self.received.append(Mail(to, parsed))
        if any(address.startswith("hang@") for address in to):
            await asyncio.sleep(HANG_S)
        if any(address.startswith("hold@") for address in to):
            await self.release.wait()
        return "250 2.0.0 Message accepted"

    def to(self, address: str) -> list[EmailMessage]:
        return [mail.message for mail in self.received if address in mail.to]


@contextlib.asynccontextmanager
async def smtp_server() -> AsyncIterator[SmtpServer]:
    """Yields a server listening on 127.0.0.1 at an ephemeral port; `url` is its `smtp://` URL."""
    handler = SmtpServer()
    loop = asyncio.get_running_loop()

    def protocol() -> Any:
        return SMTP(handler, hostname="smtp.test", loop=loop)

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    handler.url = f"smtp://127.0.0.1:{port}"
    try:
        yield handler
    finally:
        handler.release.set()
        server.close()
