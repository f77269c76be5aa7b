"""Sending one alert email through the deployment's SMTP server (`CALLSCREEN_SMTP_URL`).

`smtp://user:password@host:port` (STARTTLS when the server offers it) or `smtps://…` (TLS from the
first byte). One attempt within `email_timeout_s`; the outcome is recorded by the caller and never
carries the password.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

import aiosmtplib

from alerting.carrier import Answered
from alerting.stopwatch import stopwatch


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    tls: bool
    username: str | None
    password: str | None


def server_of(url: str) -> Server | None:
    """The server a `smtp://` or `smtps://` URL names; None when it names none."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        return None
    tls = parts.scheme == "smtps"
    return Server(
        host=parts.hostname,
        port=parts.port or (465 if tls else 587),
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


async def send(server: Server, message: EmailMessage, timeout_s: float) -> Answered:
    """Hand the message to the server; `status` is the SMTP reply code when there is one."""
    took = stopwatch()

    client = aiosmtplib.SMTP(
        hostname=server.host,
        port=server.port,
        use_tls=server.tls,
        username=server.username,
        password=server.password,
        timeout=timeout_s,
    )
    # The whole exchange shares one deadline, and the connection is dropped rather than QUIT politely:
    # aiosmtplib's own clean-up after a timed-out DATA waits out a second time-out.
    try:
        async with asyncio.timeout(timeout_s):
            await client.connect()
            await client.send_message(message)
    except (TimeoutError, aiosmtplib.SMTPTimeoutError):
        return Answered(False, None, "timeout", took())
    except aiosmtplib.SMTPResponseException as exc:
        return Answered(False, exc.code, f"smtp_{exc.code}", took())
    except (aiosmtplib.SMTPException, OSError):
        return Answered(False, None, "refused", took())
    finally:
        client.close()
    return Answered(True, 250, None, took())
