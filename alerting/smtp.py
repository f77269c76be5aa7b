"""Sending one alert email through the deployment's SMTP server (`CALLSCREEN_SMTP_URL`).

`smtp://user:password@host:port` upgrades with STARTTLS before anything but EHLO is sent, and a server that
does not offer it gets nothing: no credentials, no message (`tls`). Only `smtp://…?starttls=off` sends in
clear, for a relay on the same host or network that has no TLS. `smtps://…` is TLS from the first byte.
Certificates are verified against the system's CAs and the deployment's extra CA file
(`CALLSCREEN_WEBHOOK_CA_FILE`), as for webhooks. One attempt within `email_timeout_s`; the outcome is
recorded by the caller and never carries the password.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

import aiosmtplib

from alerting.carrier import Answered
from alerting.stopwatch import stopwatch

# The one query parameter an `smtp://` URL may carry: `starttls=off` sends in clear.
STARTTLS_OFF = "off"


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    tls: bool
    username: str | None
    password: str | None
    # STARTTLS before anything else, required (smtp:// unless the URL says `starttls=off`; not with smtps://,
    # which is TLS already).
    starttls: bool = True


def server_of(url: str) -> Server | None:
    """The server a `smtp://` or `smtps://` URL names; None when it names none."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        return None
    tls = parts.scheme == "smtps"
    starttls_off = parse_qs(parts.query).get("starttls", []) == [STARTTLS_OFF]
    return Server(
        host=parts.hostname,
        port=parts.port or (465 if tls else 587),
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        starttls=not tls and not starttls_off,
    )


def _tls_failure(exc: BaseException | None) -> bool:
    """The handshake or the certificate failed (aiosmtplib wraps some of those in its own errors)."""
    while exc is not None:
        if isinstance(exc, ssl.SSLError):
            return True
        exc = exc.__cause__
    return False


async def send(
    server: Server, message: EmailMessage, timeout_s: float, context: ssl.SSLContext | None = None
) -> Answered:
    """Hand the message to the server; `status` is the SMTP reply code when there is one. `context` verifies
    the server's certificate (default: the system's CAs)."""
    took = stopwatch()

    # No credentials here: aiosmtplib would log in on connect, before this code has seen STARTTLS.
    client = aiosmtplib.SMTP(
        hostname=server.host,
        port=server.port,
        use_tls=server.tls,
        start_tls=False,
        tls_context=context,
        timeout=timeout_s,
    )
    # The whole exchange shares one deadline, and the connection is dropped rather than QUIT politely:
    # aiosmtplib's own clean-up after a timed-out DATA waits out a second time-out.
    try:
        async with asyncio.timeout(timeout_s):
            await client.connect()
            if server.starttls and not server.tls:
                await client.ehlo()
                if not client.supports_extension("starttls"):
                    return Answered(False, None, "tls", took())
                await client.starttls()
            if server.username is not None:
                await client.login(server.username, server.password or "")
            await client.send_message(message)
    except (TimeoutError, aiosmtplib.SMTPTimeoutError):
        return Answered(False, None, "timeout", took())
    except aiosmtplib.SMTPResponseException as exc:
        return Answered(False, exc.code, f"smtp_{exc.code}", took())
    except (aiosmtplib.SMTPException, OSError) as exc:
        return Answered(False, None, "tls" if _tls_failure(exc) else "refused", took())
    finally:
        client.close()
    return Answered(True, 250, None, took())
