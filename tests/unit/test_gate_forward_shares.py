"""The gate's forward shares (ingest/forward.py): each account and each host a bounded number of forwards
in flight, refused at once when full, and every slot given back however its forward ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from infra.resolver import PublicResolver, resolver_for
from infra.settings import Settings
from ingest import forward
from ingest.forward import ACCOUNT_FULL, HOST_FULL, Forwarder, ShareFull, Slots, host_key
from ingest.shares import Shares
from tests.receiver import https_site

TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


def test_a_share_takes_up_to_its_limit_and_refuses_past_it() -> None:
    shares = Shares(2)
    assert (shares.take("a"), shares.take("a"), shares.take("a")) == (True, True, False)
    assert shares.in_flight("a") == 2
    # Another key has a share of its own.
    assert shares.take("b")
    shares.give_back("a")
    assert shares.take("a")
    assert not shares.take("a")


def test_a_key_with_nothing_in_flight_is_forgotten() -> None:
    shares = Shares(3)
    shares.take("a")
    shares.take("a")
    shares.give_back("a")
    assert (shares.in_flight("a"), len(shares)) == (1, 1)
    shares.give_back("a")
    assert (shares.in_flight("a"), len(shares)) == (0, 0)


def test_a_full_account_share_refuses_and_holds_no_host_slot() -> None:
    slots = Slots(per_account=1, per_host=5)
    with slots.holding("a", "h:443"):
        with pytest.raises(ShareFull) as refused, slots.holding("a", "other:443"):
            pass
        assert refused.value.reason == ACCOUNT_FULL
        assert (slots.hosts.in_flight("h:443"), slots.hosts.in_flight("other:443")) == (1, 0)
        # Another account is not held back by this one's full share.
        with slots.holding("b", "h:443"):
            assert slots.hosts.in_flight("h:443") == 2
    assert (len(slots.accounts), len(slots.hosts)) == (0, 0)


def test_a_full_host_share_refuses_and_gives_the_account_slot_back() -> None:
    slots = Slots(per_account=5, per_host=1)
    with slots.holding("a", "h:443"):
        with pytest.raises(ShareFull) as refused, slots.holding("b", "h:443"):
            pass
        assert refused.value.reason == HOST_FULL
        assert slots.accounts.in_flight("b") == 0
        # The same account to another host is let through.
        with slots.holding("a", "other:443"):
            assert slots.accounts.in_flight("a") == 2
    assert (len(slots.accounts), len(slots.hosts)) == (0, 0)


def test_slots_are_given_back_when_the_forward_raises() -> None:
    slots = Slots(per_account=1, per_host=1)
    with pytest.raises(RuntimeError), slots.holding("a", "h:443"):
        raise RuntimeError("the forward broke")
    assert (len(slots.accounts), len(slots.hosts)) == (0, 0)
    with slots.holding("a", "h:443"):
        pass


async def test_slots_are_given_back_when_the_forward_is_cancelled() -> None:
    slots = Slots(per_account=1, per_host=1)
    entered = asyncio.Event()

    async def hung() -> None:
        with slots.holding("a", "h:443"):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hung())
    await asyncio.wait_for(entered.wait(), 5)
    assert (slots.accounts.in_flight("a"), slots.hosts.in_flight("h:443")) == (1, 1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert (len(slots.accounts), len(slots.hosts)) == (0, 0)


def test_a_host_is_its_name_and_port() -> None:
    assert host_key("https://Agent.Example.com/twilio/voice") == "agent.example.com:443"
    assert host_key("https://agent.example.com:8443/voice?x=1") == "agent.example.com:8443"
    assert host_key("https://user@127.0.0.1:9443/voice") == "127.0.0.1:9443"


async def test_a_hung_platform_fills_its_accounts_share_and_no_other(tmp_path: Path) -> None:
    """Two forwards of account a hang; a's third is refused at once, b's forward to a host that answers
    goes through, a third account's to the hung host meets the host's share; cancelling frees it all."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    arrived: list[str] = []
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        arrived.append(request.path)
        await never.wait()
        return web.Response(status=500)

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=TWIML, content_type="application/xml")

    settings = Settings(
        webhook_ca_file=str(ca_file),
        webhook_allow_private=True,
        webhook_ports="*",
        gate_forward_timeout_s=60.0,
        gate_forwards_per_account=2,
        gate_forwards_per_host=3,
    )
    forwarder = Forwarder(settings)
    async with https_site(ca, hang) as hung_url, https_site(ca, answer) as good_url:
        hung = [asyncio.create_task(forwarder.post("a", f"{hung_url}/a{n}", b"x=1", "0.0", "allow")) for n in (1, 2)]
        try:
            deadline = time.monotonic() + 5
            while len(arrived) < 2:
                assert time.monotonic() < deadline, "the hung platform did not get both forwards"
                await asyncio.sleep(0.01)
            refused = await asyncio.wait_for(forwarder.post("a", f"{hung_url}/a3", b"x=1", "0.0", "allow"), 1)
            assert (refused.body, refused.error, refused.shed) == (None, ACCOUNT_FULL, True)
            served = await asyncio.wait_for(forwarder.post("b", f"{good_url}/voice", b"x=1", "0.0", "allow"), 5)
            assert (served.body, served.error, served.shed) == (TWIML, None, False)
            # c's own share has room, but the hung host's is full with c's one forward and a's two.
            hung.append(asyncio.create_task(forwarder.post("c", f"{hung_url}/c1", b"x=1", "0.0", "allow")))
            while len(arrived) < 3:
                assert time.monotonic() < deadline, "the hung platform did not get c's forward"
                await asyncio.sleep(0.01)
            crowded = await asyncio.wait_for(forwarder.post("c", f"{hung_url}/c2", b"x=1", "0.0", "allow"), 1)
            assert (crowded.error, crowded.shed) == (HOST_FULL, True)
            assert arrived == ["/a1", "/a2", "/c1"]
            assert forwarder.slots.hosts.in_flight(host_key(hung_url)) == 3
        finally:
            for task in hung:
                task.cancel()
            await asyncio.gather(*hung, return_exceptions=True)
            await forwarder.close()
    assert (len(forwarder.slots.accounts), len(forwarder.slots.hosts)) == (0, 0)


async def test_the_forwards_resolver_reads_the_webhook_dns_settings_as_deliveries_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name that just failed fails again at once for `webhook_dns_negative_ttl_s`, on the gate's forwards
    as on alert deliveries: both take their resolver from `infra.resolver.resolver_for`."""
    made: list[PublicResolver] = []

    def kept(settings: Settings) -> PublicResolver:
        made.append(resolver_for(settings))
        return made[-1]

    monkeypatch.setattr(forward, "resolver_for", kept)
    settings = Settings(webhook_dns_timeout_s=0.7, webhook_dns_negative_ttl_s=7.5, webhook_allow_private=True)
    forwarder = Forwarder(settings)
    try:
        forwarder.session()
        forwarder.session()
    finally:
        await forwarder.close()
    assert [(r.timeout_s, r.negative_ttl_s, r.allow_private) for r in made] == [(0.7, 7.5, True)]
