"""A crash must never silently turn screening off: while no worker answers, a gated call takes its
number's `unavailable` choice, and an operator sees it: a counter on /metrics, and a warning when the
outage begins and one when it ends (/healthz's detail: tests/edge/test_internal_surfaces.py)."""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET

import aiohttp
import pytest

from domain import commands
from tests.edge.conftest import EdgeUnderTest
from tests.service import AccountKeys, wait_for_status

NUMBER = "+14155550177"


def form(call_sid: str) -> dict[str, str]:
    return {"CallSid": call_sid, "From": "+12125550123", "To": NUMBER, "CallStatus": "ringing"}


def unscored(metrics: str, choice: str) -> float:
    """The counter's value; a labelled counter has no line before its first count."""
    prefix = f'callscreen_gate_unscored_total{{choice="{choice}"}} '
    return sum(float(line.removeprefix(prefix)) for line in metrics.splitlines() if line.startswith(prefix))


async def test_gated_calls_with_no_score_are_counted_and_warned_of_once(
    http: aiohttp.ClientSession, account: AccountKeys, edge: EdgeUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    made = edge.accounts.accounts[account.account_id]
    await edge.change(commands.set_gate(made, NUMBER, unavailable="reject"))
    token = (await edge.change(commands.rotate_token(made, "gate", NUMBER)))["token"]
    url = f"{edge.base_url}/v1/gate/{token}"
    await wait_for_status(http, "POST", f"{url}/status", 200, data={"CallSid": "CAprobe"})
    async with http.get(f"{edge.base_url}/metrics") as r:
        before = unscored(await r.text(), "reject")
    edge.log.silent_worker = True
    try:
        with caplog.at_level(logging.WARNING):
            for call_sid in ("CAsilent1", "CAsilent2"):
                async with http.post(url, data=form(call_sid)) as r:
                    root = ET.fromstring(await r.read())
                    assert (r.status, [(c.tag, c.attrib) for c in root]) == (200, [("Reject", {"reason": "rejected"})])
    finally:
        edge.log.silent_worker = False
    async with http.get(f"{edge.base_url}/metrics") as r:
        assert unscored(await r.text(), "reject") == before + 2
    # The account's first unscored call is reported once on the accounts topic, for its owner's alert.
    reports = [
        (r["account_id"], r["number"], r["choice"])
        for topic, _, r in edge.log.records
        if topic == edge.settings.topic("accounts") and r.get("kind") == "screening.unavailable"
    ]
    assert reports == [(account.account_id, NUMBER, "reject")]
    warned = [r for r in caplog.records if "unavailable choice" in r.getMessage()]
    assert [(r.levelname, r.__dict__["choice"], r.__dict__["account_id"]) for r in warned] == [
        ("WARNING", "reject", account.account_id)
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        async with http.post(url, data=form("CAscored")) as r:
            assert r.status == 200
    back = [r for r in caplog.records if r.getMessage() == "gated calls are scored again"]
    assert [r.__dict__["unscored"] for r in back] == [2]
