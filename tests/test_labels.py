"""Labels through the real broker and workers (decisions section 17): an owner's labels and a platform's
disposition change `prior` and the reputation exactly as docs/api.md, Labels says, and `callscreen rebuild`
gives every answer back, labels included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from domain.rules import MIN_MS, SECOND_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import (
    AccountKeys,
    RunningService,
    create_account,
    rebuild,
    running_service,
    settled,
    wait_for_status,
)
from tests.traffic import NO_SWEEP, assert_same_answers, snapshot

pytestmark = pytest.mark.slow

TO = "+14155552671"
GOOD_CALLER = "+12125550161"
SPAM_CALLER = "+12125550162"
PLATFORM_CALLER = "+12125550163"


@pytest.fixture(scope="module")
def labels_service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service of its own: its rebuild starts a generation no other test counts on. Without the wall
    clock's sweep, so that the answers compared before and after the rebuild stay still."""
    data_dir: Path = tmp_path_factory.mktemp("labels") / "data"
    with running_service(data_dir, kafka, env=NO_SWEEP) as running:
        yield running


class Client:
    def __init__(self, http: aiohttp.ClientSession, base_url: str, base: int) -> None:
        self.http, self.base_url, self.base = http, base_url, base

    async def post(self, account: AccountKeys, body: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(f"{self.base_url}/v1/events", json=body, headers=account.headers) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())

    async def start(self, account: AccountKeys, call_id: str, caller: str, minute: float) -> dict[str, Any]:
        at = format_ms(self.base + int(minute * MIN_MS))
        body = {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": at}
        return await self.post(account, {**body, "attrs": {"attestation": "C"}})

    async def call(self, account: AccountKeys, call_id: str, caller: str, minute: float, **end: Any) -> int:
        """A call of a minute that settles at 35 (an attestation C): by its score neither good nor bad."""
        await self.start(account, call_id, caller, minute)
        at = format_ms(self.base + int(minute * MIN_MS) + MIN_MS)
        ended = await self.post(account, {"type": "call.ended", "call_id": call_id, "at": at, **end})
        return int(ended["spam_score"])

    async def label(self, account: AccountKeys, call_id: str, label: str) -> dict[str, Any]:
        url = f"{self.base_url}/v1/calls/{call_id}/label"
        async with self.http.post(url, json={"label": label}, headers=account.headers) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())

    async def get(self, account: AccountKeys, path: str) -> dict[str, Any]:
        async with self.http.get(f"{self.base_url}{path}", headers=account.headers) as r:
            assert r.status == 200, (path, await r.text())
            return dict(await r.json())

    async def labels_of(self, account: AccountKeys, caller: str) -> dict[str, int]:
        return dict((await self.get(account, f"/v1/reputation/{caller.replace('+', '%2B')}"))["labels"])


@pytest.mark.timeout(300)
async def test_labels_move_prior_and_reputation_and_a_rebuild_keeps_them(
    labels_service: RunningService, http: aiohttp.ClientSession
) -> None:
    service = labels_service
    base_url, settings = service.base_url, service.settings
    owner, second, scorer = [await create_account(settings, http, base_url) for _ in range(3)]
    c = Client(http, base_url, now_ms() - 90 * MIN_MS)

    # Good labels count in `prior.good` and for `prior_good`, on the labelling account.
    for i in range(3):
        assert await c.call(owner, f"g{i}", GOOD_CALLER, 2 * i) == 35
    before = await c.start(owner, "g-probe-1", GOOD_CALLER, 10)
    assert (before["prior"]["good"], before["reasons"], before["score"]) == (0, ["attestation_c"], 0.35)
    for i in range(3):
        record = await c.label(owner, f"g{i}", "good")
        assert (record["call_id"], record["label"]) == (f"g{i}", "good")
        assert record["labelled_at"] is not None
    after = await c.start(owner, "g-probe-2", GOOD_CALLER, 12)
    assert (after["prior"]["good"], after["reasons"], after["score"]) == (3, ["attestation_c", "prior_good"], 0.175)
    assert await c.labels_of(owner, GOOD_CALLER) == {"spam": 0, "good": 1}

    # A spam label trips `prior_bad` on the labelling account at once; five of them count once network-wide.
    # (Three minutes apart: no more than five calls of the caller to the number within ten minutes.)
    for i in range(5):
        await c.call(owner, f"s{i}", SPAM_CALLER, 20 + 3 * i)
    assert "prior_bad" not in (await c.start(owner, "s-probe-1", SPAM_CALLER, 35))["reasons"]
    for i in range(5):
        assert (await c.label(owner, f"s{i}", "spam"))["label"] == "spam"
    assert (await c.start(owner, "s-probe-2", SPAM_CALLER, 37))["reasons"] == ["prior_bad", "attestation_c"]
    assert await c.labels_of(scorer, SPAM_CALLER) == {"spam": 1, "good": 0}
    # Another tenant's score does not move on one account's word ...
    answer = await c.start(scorer, "x-probe-1", SPAM_CALLER, 38)
    assert (answer["reasons"], answer["checks"]["network_bad_accounts"]) == (["attestation_c"], 1)
    # ... and does once a second account agrees.
    await c.call(second, "t0", SPAM_CALLER, 39)
    await c.label(second, "t0", "spam")
    assert await c.labels_of(scorer, SPAM_CALLER) == {"spam": 2, "good": 0}
    answer = await c.start(scorer, "x-probe-2", SPAM_CALLER, 40)
    assert (answer["reasons"], answer["checks"]["network_bad_accounts"]) == (["prior_bad", "attestation_c"], 2)

    # A platform's disposition is the label until the owner gives one; the owner's then stands.
    await c.call(second, "d0", PLATFORM_CALLER, 50, disposition="spam")
    assert (await c.get(second, "/v1/calls/d0"))["label"] == "spam"
    assert await c.labels_of(second, PLATFORM_CALLER) == {"spam": 1, "good": 0}
    labelled = await c.label(second, "d0", "good")
    again = format_ms(c.base + 50 * MIN_MS + 61 * SECOND_MS)
    end = {"type": "call.ended", "call_id": "d0", "at": again, "reason": "completed", "disposition": "spam"}
    assert (await c.post(second, end))["duplicate"] is True
    record = await c.get(second, "/v1/calls/d0")
    assert (record["label"], record["labelled_at"]) == ("good", labelled["labelled_at"])
    assert await c.labels_of(second, PLATFORM_CALLER) == {"spam": 0, "good": 1}

    # The log is the truth: a rebuild gives every answer back, labels and what they counted for included.
    callers = [GOOD_CALLER, SPAM_CALLER, PLATFORM_CALLER]
    await settled(settings)
    snapshots = [await snapshot(http, base_url, account, callers) for account in (owner, second, scorer)]
    done = await rebuild(service)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    await wait_for_status(http, "GET", f"{base_url}/healthz", 200, timeout_s=30)
    await settled(settings)
    rebuilt = [await snapshot(http, base_url, account, callers) for account in (owner, second, scorer)]
    assert_same_answers(rebuilt, snapshots)
    assert rebuilt[0]["/v1/calls/s0"]["label"] == "spam"
    assert rebuilt[0]["/v1/evaluation"]["matrix"]["allow"] == {"spam": 5, "good": 3}
    assert rebuilt[0][f"/v1/reputation/{SPAM_CALLER.replace('+', '%2B')}"]["labels"] == {"spam": 2, "good": 0}


@pytest.mark.timeout(120)
async def test_evaluation_of_a_labelled_set(labels_service: RunningService, http: aiohttp.ClientSession) -> None:
    """The matrix and the three rates of decisions section 17 over real workers' call records."""
    service = labels_service
    account = await create_account(service.settings, http, service.base_url)
    c = Client(http, service.base_url, now_ms() - 3 * 60 * MIN_MS)
    failed, plain = {"attestation": "failed"}, {"attestation": "A"}
    # Calling itself with a failed attestation is a reject (0.82); the second such call is one again.
    plan = [
        ("e-r0", TO, failed, "spam"),
        ("e-r1", TO, failed, "good"),
        ("e-v0", "+13125550171", failed, "spam"),
        ("e-a0", "+16465550172", plain, "good"),
        ("e-a1", "+17185550173", plain, "spam"),
        ("e-u0", "+19175550174", plain, None),
    ]
    by_reason: dict[str, dict[str, int]] = {}
    for n, (call_id, caller, attrs, label) in enumerate(plan):
        at = format_ms(c.base + n * 20 * MIN_MS)
        body = {"type": "call.started", "call_id": call_id, "to": TO, "from": caller, "at": at, "attrs": attrs}
        answer = await c.post(account, body)
        assert answer["action"] == {"e-r": "reject", "e-v": "review"}.get(call_id[:3], "allow"), answer
        if label is not None:
            await c.label(account, call_id, label)
            for reason in answer["reasons"]:
                by_reason.setdefault(reason, {"spam": 0, "good": 0})[label] += 1
    assert by_reason["self_call"] == {"spam": 1, "good": 1}
    since, until = format_ms(c.base), format_ms(c.base + len(plan) * 20 * MIN_MS)
    evaluation = await c.get(account, f"/v1/evaluation?since={since}&until={until}")
    assert evaluation == {
        "labelled": 5,
        "matrix": {
            "allow": {"spam": 1, "good": 1},
            "review": {"spam": 1, "good": 0},
            "reject": {"spam": 1, "good": 1},
        },
        "precision": 0.5,
        "recall": 0.3333,
        "false_positive_rate": 0.5,
        "by_reason": dict(sorted(by_reason.items())),
    }
    # A window of the first call only.
    first = await c.get(account, f"/v1/evaluation?since={since}&until={format_ms(c.base + MIN_MS)}")
    assert (first["labelled"], first["precision"], first["recall"]) == (1, 1.0, 1.0)
