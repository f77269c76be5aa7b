"""One webhook delivery: sign, POST once with a time-out, and describe the outcome.

The outcome's `error` is coarse on purpose (docs/api.md, Alert delivery): `timeout`, `refused`, `tls`, or
`status_<code>` for an answer outside 2xx. A refused port, a private address, a name that does not
resolve and a closed port all read `refused`, so an account cannot use its webhook to map a network.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp

from alerting.signing import signature_header
from alerting.stopwatch import stopwatch
from infra.webhook_url import target_allowed

TIMEOUT = "timeout"
REFUSED = "refused"
TLS = "tls"


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None
    error: str | None
    duration_ms: int


@dataclass(frozen=True)
class Policy:
    """Where deliveries may go: the deployment's webhook settings."""

    timeout_s: float
    ports: str
    allow_private: bool


async def deliver(session: aiohttp.ClientSession, url: str, body: bytes, secrets: list[str], policy: Policy) -> Outcome:
    """POST the body exactly as signed; one attempt, no retries. The session's resolver drops private
    addresses (alerting.resolver)."""
    elapsed = stopwatch()

    if not target_allowed(url, policy.ports, policy.allow_private):
        return Outcome(False, None, REFUSED, elapsed())
    headers = {
        "Content-Type": "application/json",
        "X-Service-Signature": signature_header(secrets, int(time.time()), body),
    }
    # aiohttp rounds deadlines of 5 s and more up to the next whole second (its ceil_threshold), which
    # made the 8 s attempt last up to 9 s; the threshold above the timeout keeps the deadline exact.
    timeout = aiohttp.ClientTimeout(total=policy.timeout_s, ceil_threshold=policy.timeout_s + 1)
    try:
        async with session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False) as response:
            if 200 <= response.status < 300:
                return Outcome(True, response.status, None, elapsed())
            return Outcome(False, response.status, f"status_{response.status}", elapsed())
    except TimeoutError:
        return Outcome(False, None, TIMEOUT, elapsed())
    except aiohttp.ClientSSLError:
        return Outcome(False, None, TLS, elapsed())
    except (aiohttp.ClientError, OSError):
        return Outcome(False, None, REFUSED, elapsed())
