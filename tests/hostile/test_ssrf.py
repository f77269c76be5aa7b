"""A webhook cannot reach inside the network or map it (docs/api.md, Alert delivery).

Where a delivery may connect is decided at connect time by the alerting role's resolver, the URL's port
is checked when it is set and again at delivery, and a failed delivery's error is one of four coarse words.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
import trustme
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from alerting.delivery import Outcome, Policy, deliver
from callscreen.admin import Admin
from infra.ports import free_port
from infra.resolver import NoPublicAddress, PublicResolver
from infra.webhook_url import is_public, tls_context
from tests.receiver import Receiver
from tests.service import AccountKeys, RunningService, create_account
from tests.test_webhooks import raise_rate_alert, until
from tests.topics import read_topic

BODY = orjson.dumps({"id": "alrt_00000000000000000000", "type": "test"})
SECRET = "whsec_" + "0" * 32


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("10.0.0.1", False),
        ("2606:4700::1111", True),
        ("::1", False),
        # IPv4-mapped
        ("::ffff:127.0.0.1", False),
        ("::ffff:93.184.215.14", True),
        # NAT64, the well-known prefix: the last 32 bits
        ("64:ff9b::a9fe:a9fe", False),
        ("64:ff9b::10.0.0.1", False),
        ("64:ff9b::93.184.215.14", True),
        # NAT64, local use: the prefix length is the operator's, so every RFC 6052 reading must be public
        ("64:ff9b:1::a00:1", False),
        ("64:ff9b:1:a00:1::", False),
        ("64:ff9b:1:5db8:d7:e00:5db8:d70e", True),
        # 6to4
        ("2002:7f00:1::1", False),
        ("2002:c0a8:101::1", False),
        ("2002:5db8:d70e::1", True),
        # Teredo: server 65.54.227.120, client 192.0.2.45 (a documentation range) then 93.184.215.14
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),
        ("2001:0:4136:e378:8000:63bf:a247:28f1", True),
        # IPv4-compatible (deprecated) still carries its IPv4 address
        ("::10.0.0.1", False),
    ],
)
def test_is_public_sees_through_ipv6_forms_that_carry_ipv4(address: str, public: bool) -> None:
    assert is_public(address) is public


class Fixed(AbstractResolver):
    """A name server that answers every name with the same addresses, or never answers."""

    def __init__(self, addresses: list[str], hang: bool = False) -> None:
        self.addresses = addresses
        self.hang = hang
        self.asked = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked += 1
        if self.hang:
            await asyncio.Event().wait()
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.addresses
        ]

    async def close(self) -> None:
        return None


@pytest.fixture
async def plain_server() -> AsyncIterator[tuple[int, list[str]]]:
    """A plain HTTP server on loopback that records every request it gets."""
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield port, hits
    await runner.cleanup()


async def get(resolver: AbstractResolver, url: str) -> int:
    connector = aiohttp.TCPConnector(resolver=resolver)
    async with aiohttp.ClientSession(connector=connector) as session, session.get(url) as response:
        return response.status


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["::ffff:127.0.0.1"],
        ["64:ff9b::7f00:1"],
        ["2002:7f00:1::1"],
        ["10.0.0.1", "127.0.0.1", "169.254.169.254"],
    ],
)
async def test_the_resolver_drops_private_targets_at_connect(
    plain_server: tuple[int, list[str]], addresses: list[str]
) -> None:
    port, hits = plain_server
    inner = Fixed(addresses)
    with pytest.raises(aiohttp.ClientConnectorDNSError) as refused:
        await get(PublicResolver(2.0, allow_private=False, inner=inner), f"http://hook.example:{port}/x")
    assert isinstance(refused.value.os_error, NoPublicAddress)
    assert inner.asked == 1 and hits == []


async def test_the_resolver_keeps_only_the_public_addresses_of_a_name() -> None:
    resolver = PublicResolver(2.0, allow_private=False, inner=Fixed(["127.0.0.1", "93.184.215.14", "64:ff9b::a00:1"]))
    assert [r["host"] for r in await resolver.resolve("hook.example", 443)] == ["93.184.215.14"]


async def test_allow_private_connects_to_what_the_name_says(plain_server: tuple[int, list[str]]) -> None:
    port, hits = plain_server
    resolver = PublicResolver(2.0, allow_private=True, inner=Fixed(["127.0.0.1"]))
    assert await get(resolver, f"http://a.example:{port}/x") == 204
    assert hits == ["/x"]


async def test_a_lookup_that_never_answers_times_out() -> None:
    resolver = PublicResolver(0.3, allow_private=False, inner=Fixed([], hang=True))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await resolver.resolve("slow.example", 443)
    assert time.monotonic() - started < 1.0


async def send(url: str, policy: Policy, ca_file: str = "", resolver: AbstractResolver | None = None) -> Outcome:
    """One delivery as the alerting role makes it: its TLS context and its resolver."""
    resolver = resolver or PublicResolver(2.0, policy.allow_private)
    connector = aiohttp.TCPConnector(ssl=tls_context(ca_file), resolver=resolver)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await deliver(session, url, BODY, [SECRET], policy)


ANY_PORT_PRIVATE = Policy(timeout_s=8.0, ports="*", allow_private=True)
ANY_PORT_PUBLIC = Policy(timeout_s=8.0, ports="*", allow_private=False)
DEFAULT_PORTS = Policy(timeout_s=8.0, ports="443,8443", allow_private=True)


async def test_errors_are_coarse(receiver: Receiver, webhook_ca: tuple[trustme.CA, Path]) -> None:
    ca_file = str(webhook_ca[1])
    delivered = await send(f"{receiver.url}/ok/x", ANY_PORT_PRIVATE, ca_file)
    assert (delivered.delivered, delivered.status, delivered.error) == (True, 204, None)
    answered = await send(f"{receiver.url}/status/500/x", ANY_PORT_PRIVATE, ca_file)
    assert (answered.delivered, answered.status, answered.error) == (False, 500, "status_500")
    moved = await send(f"{receiver.url}/status/302/x", ANY_PORT_PRIVATE, ca_file)
    assert (moved.delivered, moved.status, moved.error) == (False, 302, "status_302")
    untrusted = await send(f"{receiver.url}/ok/x", ANY_PORT_PRIVATE)
    assert (untrusted.delivered, untrusted.status, untrusted.error) == (False, None, "tls")
    closed = await send(f"https://127.0.0.1:{free_port()}/x", ANY_PORT_PRIVATE, ca_file)
    assert (closed.delivered, closed.status, closed.error) == (False, None, "refused")
    slow = await send(f"{receiver.url}/hang/x", Policy(timeout_s=0.5, ports="*", allow_private=True), ca_file)
    assert (slow.delivered, slow.status, slow.error) == (False, None, "timeout")
    unanswered = await send(
        "https://hook.example/x", ANY_PORT_PUBLIC, ca_file, PublicResolver(0.3, False, Fixed([], hang=True))
    )
    assert (unanswered.delivered, unanswered.status, unanswered.error) == (False, None, "timeout")
    assert len(receiver.received) == 4


async def test_private_targets_and_other_ports_are_refused_before_connecting(
    receiver: Receiver, webhook_ca: tuple[trustme.CA, Path]
) -> None:
    ca_file = str(webhook_ca[1])
    port = receiver.url.rsplit(":", 1)[1]
    refused = [
        # A port the deployment does not allow, even on an address it does.
        await send(f"{receiver.url}/ok/x", DEFAULT_PORTS, ca_file),
        # Private addresses, as literals (aiohttp never resolves those) and behind names.
        await send(f"{receiver.url}/ok/x", ANY_PORT_PUBLIC, ca_file),
        await send(f"https://[::ffff:127.0.0.1]:{port}/ok/x", ANY_PORT_PUBLIC, ca_file),
        await send(f"https://localhost:{port}/ok/x", ANY_PORT_PUBLIC, ca_file),
        await send(
            f"https://hook.example:{port}/ok/x",
            ANY_PORT_PUBLIC,
            ca_file,
            PublicResolver(2.0, False, Fixed(["127.0.0.1"])),
        ),
        await send(
            f"https://hook.example:{port}/ok/x",
            ANY_PORT_PUBLIC,
            ca_file,
            PublicResolver(2.0, False, Fixed(["64:ff9b::7f00:1"])),
        ),
        await send(
            f"https://hook.example:{port}/ok/x",
            ANY_PORT_PUBLIC,
            ca_file,
            PublicResolver(2.0, False, Fixed(["2002:7f00:1::1"])),
        ),
    ]
    assert [(o.delivered, o.status, o.error) for o in refused] == [(False, None, "refused")] * len(refused)
    assert receiver.received == []


@pytest.mark.parametrize(
    ("url", "status", "reason"),
    [
        ("https://93.184.215.14:8080/hook", 400, "port_not_allowed"),
        ("https://93.184.215.14:22/hook", 400, "port_not_allowed"),
        ("https://93.184.215.14:8443/hook", 200, None),
        ("https://93.184.215.14:443/hook", 200, None),
        ("https://[::ffff:127.0.0.1]/hook", 400, "private_address"),
        ("https://[64:ff9b::a9fe:a9fe]/latest", 400, "private_address"),
        ("https://[2002:a9fe:a9fe::1]/latest", 400, "private_address"),
    ],
)
async def test_patch_refuses_other_ports_and_hidden_private_addresses(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys, url: str, status: int, reason: str | None
) -> None:
    async with http.patch(f"{base_url}/v1/account", json={"alert_webhook_url": url}, headers=account.headers) as r:
        assert r.status == status
        body = await r.json()
    if reason is None:
        assert body["alert_webhook_url"] == url
    else:
        assert body == {"error": "invalid_webhook_url", "reason": reason}


async def test_delivery_refuses_a_url_set_before_the_deployment_narrowed_its_ports(
    service: RunningService, http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    """The shared service allows ports 443 and 8443 and public addresses only. URLs set while it allowed more
    (appended to the accounts topic as that edge would have) are refused at delivery, with the same word."""
    targets = {
        f"{receiver.url}/ok/port": "a port no longer allowed",
        "https://localhost:8443/ok/private": "a name that resolves to loopback",
    }
    accounts: dict[str, AccountKeys] = {}
    async with Admin(service.settings) as admin:
        for url in targets:
            account = await create_account(service.settings, http, service.base_url)
            await admin.append({"kind": "webhook.set", "account_id": account.account_id, "alert_webhook_url": url})
            accounts[url] = account
    for number, account in enumerate(accounts.values()):
        await raise_rate_alert(http, service, account, f"+44791140000{number}")

    async def outcomes() -> list[dict[str, object] | None]:
        found = []
        for account in accounts.values():
            url = f"{service.base_url}/v1/alerts?type=caller.rate_exceeded"
            async with http.get(url, headers=account.headers) as r:
                alerts = (await r.json())["data"]
            found.append(alerts[0]["delivery"] if alerts else None)
        return found

    async def both_decided() -> bool:
        return all(outcome is not None for outcome in await outcomes())

    await until(both_decided, 30)
    for outcome in await outcomes():
        assert outcome is not None
        assert (outcome["status"], outcome["error"]) == (None, "refused")
    records = [orjson.loads(r.value) for r in await read_topic(service.settings, service.settings.topic("deliveries"))]
    ids = {a.account_id for a in accounts.values()}
    errors = [r["error"] for r in records if r["account_id"] in ids and r["kind"] == "delivery.outcome"]
    assert errors and set(errors) == {"refused"}
    assert receiver.received == []
