"""A black-holed host name delays only the lookups of that name (infra/resolver.py, docs/architecture.md rule
5): lookups are c-ares queries with their own deadline, not threads of a pool, and a name that just failed is
answered from a negative cache without asking again.

The name server here is a UDP socket on loopback that answers the names it knows with an A record and reads
and drops every other query, as a black-holed zone's server would.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import aiohttp
import orjson
import pytest
import trustme
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from alerting.delivery import Policy, deliver
from infra.ports import free_port
from infra.resolver import NoPublicAddress, PublicResolver, c_ares, resolver_for
from infra.settings import Settings
from infra.webhook_url import tls_context

TYPE_A = 1
PUBLIC = "93.184.215.14"
BODY = orjson.dumps({"id": "alrt_00000000000000000000", "type": "test"})
SECRET = "whsec_" + "0" * 32


def question(query: bytes) -> tuple[str, int, int]:
    """The queried name (lower case), its type, and where the question section ends."""
    labels, at = [], 12
    while query[at]:
        labels.append(query[at + 1 : at + 1 + query[at]].decode().lower())
        at += 1 + query[at]
    (qtype,) = struct.unpack_from("!H", query, at + 1)
    return ".".join(labels), qtype, at + 5


def answer(query: bytes, end: int, qtype: int, address: str) -> bytes:
    """A reply that echoes the query's id and question: one A record (TTL 0) for an A query, none (no error,
    no data) for any other type."""
    records = b""
    if qtype == TYPE_A:
        # Name: a pointer to the question's (offset 12); type A, class IN, TTL 0, 4 bytes of address.
        records = b"\xc0\x0c" + struct.pack("!HHIH", TYPE_A, 1, 0, 4) + socket.inet_aton(address)
    # Flags: a response, recursion desired and available, no error.
    header = query[:2] + struct.pack("!HHHHH", 0x8180, 1, 1 if records else 0, 0, 0)
    return header + query[12:end] + records


class LoopbackDNS(asyncio.DatagramProtocol):
    """Answers the names in `answers`; every other query is read, counted and dropped."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: Counter[str] = Counter()
        self.transport: asyncio.DatagramTransport | None = None
        self.address = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)
        host, port = transport.get_extra_info("sockname")[:2]
        self.address = f"{host}:{port}"

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        name, qtype, end = question(data)
        self.asked[name] += 1
        address = self.answers.get(name)
        if address is not None and self.transport is not None:
            self.transport.sendto(answer(data, end, qtype, address), addr)


@pytest.fixture
async def dns() -> AsyncIterator[LoopbackDNS]:
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(
        lambda: LoopbackDNS({"answered.test": PUBLIC, "receiver.test": "127.0.0.1"}), local_addr=("127.0.0.1", 0)
    )
    yield server
    transport.close()


def resolver(dns: LoopbackDNS, timeout_s: float, allow_private: bool = False, **options: Any) -> PublicResolver:
    return PublicResolver(timeout_s, allow_private, nameservers=[dns.address], **options)


async def in_flight(dns: LoopbackDNS, names: int) -> None:
    """Until the name server has been asked about `names` names (at most a second)."""
    async with asyncio.timeout(1.0):
        while len(dns.asked) < names:
            await asyncio.sleep(0.01)


async def refusal(lookup: Any) -> tuple[type[BaseException] | None, float]:
    """What a lookup raised, and how long it took."""
    started = time.monotonic()
    try:
        await lookup
    except Exception as exc:
        return type(exc), time.monotonic() - started
    return None, time.monotonic() - started


async def test_fifty_black_holed_names_each_time_out_and_a_known_name_still_resolves_at_once(
    dns: LoopbackDNS,
) -> None:
    public = resolver(dns, timeout_s=0.5)
    started = time.monotonic()
    held = [
        asyncio.create_task(refusal(public.resolve(f"blackhole-{n}.test", 443, socket.AF_UNSPEC))) for n in range(50)
    ]
    await in_flight(dns, 50)
    asked = time.monotonic()
    found = await public.resolve("answered.test", 443, socket.AF_UNSPEC)
    assert [r["host"] for r in found] == [PUBLIC]
    # Answered while every black-holed lookup is still waiting out its time-out, not behind them.
    assert not any(task.done() for task in held)
    assert time.monotonic() - asked < 0.3
    outcomes = await asyncio.gather(*held)
    assert {kind for kind, _ in outcomes} == {TimeoutError}
    # Each within its own time-out (with room for a loaded machine), not queued behind the others.
    assert max(took for _, took in outcomes) < 0.5 + 1.0
    assert time.monotonic() - started < 0.5 + 1.5
    await public.close()


async def test_deliveries_to_black_holed_names_hold_up_no_other_delivery(
    dns: LoopbackDNS, webhook_ca: tuple[trustme.CA, Path]
) -> None:
    """The issue's case end to end: one account's 50 webhooks on black-holed names, another's on a name that
    resolves, through `deliver` and a connector on the resolver as the alerting role builds them."""
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(status=204)

    authority, ca_file = webhook_ca
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("receiver.test").configure_cert(served)
    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=served).start()
    policy = Policy(timeout_s=8.0, ports="*", allow_private=True)
    # The resolver the alerting role builds from its settings, on the loopback name server.
    settings = Settings(webhook_dns_servers=dns.address, webhook_dns_timeout_s=0.5, webhook_allow_private=True)
    public = resolver_for(settings)
    connector = aiohttp.TCPConnector(ssl=tls_context(str(ca_file)), limit=0, resolver=public)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            held = [
                asyncio.create_task(deliver(session, f"https://hook-{n}.blackhole.test/x", BODY, [SECRET], policy))
                for n in range(50)
            ]
            await in_flight(dns, 50)
            other = await deliver(session, f"https://receiver.test:{port}/other", BODY, [SECRET], policy)
            assert (other.delivered, other.status, other.error) == (True, 204, None)
            assert not any(task.done() for task in held)
            assert other.duration_ms < 300
            stuck = await asyncio.gather(*held)
    finally:
        await runner.cleanup()
        await public.close()
    assert {(o.delivered, o.status, o.error) for o in stuck} == {(False, None, "timeout")}
    # Each gave up after its lookup's 0.5 s (with room for a loaded machine), far from the 8 s attempt.
    assert max(o.duration_ms for o in stuck) < 2000
    assert hits == ["/other"]


async def test_a_failed_name_is_answered_from_the_negative_cache_without_a_query(dns: LoopbackDNS) -> None:
    now = [1000.0]
    public = resolver(dns, timeout_s=0.3, negative_ttl_s=30.0, clock=lambda: now[0])
    with pytest.raises(TimeoutError):
        await public.resolve("gone.test", 443, socket.AF_UNSPEC)
    asked = dns.asked["gone.test"]
    assert asked >= 1
    # Asked again within the TTL: the same failure at once, and nothing reaches the name server.
    kind, took = await refusal(public.resolve("Gone.Test.", 443, socket.AF_UNSPEC))
    assert (kind, dns.asked["gone.test"]) == (TimeoutError, asked)
    assert took < 0.05
    # Past the TTL the name is asked again.
    now[0] += 30.0
    with pytest.raises(TimeoutError):
        await public.resolve("gone.test", 443, socket.AF_UNSPEC)
    assert dns.asked["gone.test"] > asked
    await public.close()


async def test_a_lookup_c_ares_gives_up_on_reads_as_a_timeout(dns: LoopbackDNS) -> None:
    """c-ares' own deadline (here shorter than the resolver's) is a timeout too, not a name that does not
    resolve: the delivery records `timeout` either way."""
    public = PublicResolver(5.0, False, c_ares(0.2, [dns.address]))
    kind, took = await refusal(public.resolve("slow.test", 443, socket.AF_UNSPEC))
    assert kind is TimeoutError
    assert took < 1.0
    await public.close()


class Failing(AbstractResolver):
    """A resolver for which every name fails at once, counting what it is asked."""

    def __init__(self, addresses: Sequence[str] = ()) -> None:
        self.asked: Counter[str] = Counter()
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked[host] += 1
        if not self.addresses:
            raise OSError(None, "Domain name not found")
        return [
            ResolveResult(hostname=host, host=a, port=port, family=socket.AF_INET, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        return None


async def test_a_name_that_does_not_resolve_is_cached_as_such_and_the_cache_is_bounded() -> None:
    inner = Failing()
    public = PublicResolver(1.0, False, inner, negative_cache_size=2)
    for name in ("a.test", "b.test", "a.test", "b.test"):
        with pytest.raises(OSError) as failed:
            await public.resolve(name, 443)
        assert not isinstance(failed.value, TimeoutError)
    assert inner.asked == {"a.test": 1, "b.test": 1}
    # A third name pushes out the oldest failure, which is then asked again.
    for name in ("c.test", "a.test", "c.test"):
        with pytest.raises(OSError):
            await public.resolve(name, 443)
    assert inner.asked == {"a.test": 2, "b.test": 1, "c.test": 1}
    assert len(public.failed) == 2


async def test_a_name_with_only_private_addresses_is_refused_every_time_and_not_cached() -> None:
    inner = Failing(["10.0.0.1"])
    public = PublicResolver(1.0, False, inner)
    for _ in range(2):
        with pytest.raises(NoPublicAddress):
            await public.resolve("inside.test", 443)
    assert inner.asked["inside.test"] == 2 and not public.failed
