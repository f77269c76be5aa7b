"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts, parsed by the `email`
package. Recipients pick its behaviour: `refuse@…` gets 550 for the message, `hang@…` no answer for a
minute, `hold@…` an answer once `release` is set; everyone else 250.

Given a certificate authority it offers STARTTLS (and requires it) with a certificate for 127.0.0.1 from
that authority, and its `url` is a plain `smtp://` one, which the service upgrades. Without, it offers no
STARTTLS and its `url` says `?starttls=off`, the only way the service sends in clear. It takes any login
(offering AUTH in clear only without TLS), and notes every sender and login with whether TLS was on."""

from __future__ import annotations

import asyncio
import contextlib
import email
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import default
from typing import Any

import trustme
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

HANG_S = 60.0


@dataclass
class Mail:
    to: list[str]
    message: EmailMessage
    tls: bool = False


@dataclass
class SmtpServer:
    url: str = ""
    port: int = 0
    received: list[Mail] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    # Each MAIL FROM's address and each AUTH's user name, with whether the session was under TLS.
    senders: list[tuple[str, bool]] = field(default_factory=list)
    logins: list[tuple[str, bool]] = field(default_factory=list)

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        self.senders.append((address, session.ssl is not None))
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    def authenticate(self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any) -> AuthResult:
        user = data.login.decode() if isinstance(data, LoginPassword) else str(data)
        self.logins.append((user, session.ssl is not None))
        return AuthResult(success=True)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        to = [str(address) for address in envelope.rcpt_tos]
        if any(address.startswith("refuse@") for address in to):
            return "550 5.7.1 Message refused by policy"
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw, policy=default)
        assert isinstance(parsed, EmailMessage)
        self.received.append(Mail(to, parsed, session.ssl is not None))
        if any(address.startswith("hang@") for address in to):
            await asyncio.sleep(HANG_S)
        if any(address.startswith("hold@") for address in to):
            await self.release.wait()
        return "250 2.0.0 Message accepted"

    def to(self, address: str) -> list[EmailMessage]:
        return [mail.message for mail in self.received if address in mail.to]


@contextlib.asynccontextmanager
async def smtp_server(ca: trustme.CA | None = None) -> AsyncIterator[SmtpServer]:
    """Yields a server listening on 127.0.0.1 at an ephemeral port; `url` is its `smtp://` URL, with
    STARTTLS when `ca` gives it a certificate, else `?starttls=off`."""
    handler = SmtpServer()
    loop = asyncio.get_running_loop()
    context: ssl.SSLContext | None = None
    if ca is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)

    def protocol() -> Any:
        return SMTP(
            handler,
            hostname="smtp.test",
            loop=loop,
            tls_context=context,
            require_starttls=context is not None,
            authenticator=handler.authenticate,
            auth_require_tls=context is not None,
        )

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    handler.port = server.sockets[0].getsockname()[1]
    handler.url = f"smtp://127.0.0.1:{handler.port}" + ("" if context is not None else "?starttls=off")
    try:
        yield handler
    finally:
        handler.release.set()
        server.close()
