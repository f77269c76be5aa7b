"""Secrets at rest: no webhook signing secret is readable on the topics, yet every delivery is signed
with it (README, Secrets at rest)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest
import trustme

from callscreen.admin import Admin
from domain import commands
from domain.accounts import stamp
from infra.clock import now_ms
from infra.kafka import make_producer
from tests.receiver import Receiver, receiver_env
from tests.service import AccountKeys, RunningService, create_account, role_pids, running_service, wait_for_status
from tests.test_webhooks import independent_check, listed, raise_rate_alert, until, use_hook
from tests.topics import read_topic

# Every topic the service writes: a secret must reach none of them in the clear.
TOPICS = ("accounts", "events", "decisions", "alerts", "deliveries", "billing", "status", "control")
# Accounts written the way the topic held them before sealing, on purpose.
WRITTEN_PLAIN: set[str] = set()


@pytest.fixture(scope="module")
def sealed_service(
    kafka: str, tmp_path_factory: pytest.TempPathFactory, webhook_ca: tuple[trustme.CA, Path]
) -> Iterator[RunningService]:
    env = receiver_env(webhook_ca[1])
    with running_service(tmp_path_factory.mktemp("sealed") / "data", kafka, env=env) as running:
        yield running


async def raw_topics(service: RunningService) -> dict[str, bytes]:
    """Each topic's keys and values, byte for byte, as anyone with read access gets them."""
    settings = service.settings
    found = {}
    for name in TOPICS:
        records = await read_topic(settings, settings.topic(name))
        raw = [(r.key or b"") + b"\t" + (r.value or b"") for r in records]
        found[name] = b"\n".join(r for r in raw if not any(a.encode() in r for a in WRITTEN_PLAIN))
    return found


async def delivered_header(
    http: aiohttp.ClientSession, service: RunningService, receiver: Receiver, account: AccountKeys, caller: str
) -> tuple[str, bytes]:
    """Raise an alert for the account and return the signature header and body its webhook got."""
    await use_hook(http, service, account, f"{receiver.url}/ok/{account.account_id}")
    await raise_rate_alert(http, service, account, caller)

    async def arrived() -> bool:
        alerts = await listed(http, service, account)
        return bool(alerts) and bool(receiver.for_alert(alerts[0]["id"]))

    await until(arrived, 10)
    (alert,) = await listed(http, service, account)
    (got,) = receiver.for_alert(alert["id"])
    return got.headers["X-Service-Signature"], got.body


async def test_no_signing_secret_is_on_the_topics_yet_deliveries_verify(
    sealed_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    account = await create_account(sealed_service.settings, http, sealed_service.base_url)
    async with Admin(sealed_service.settings) as admin:
        rotated = (await admin.secret_rotate(account.account_id))["signing_secret"]
        assert (await admin.secret_show(account.account_id))["signing_secret"] == rotated
    created_secret = account.signing_secret
    assert created_secret.startswith("whsec_") and rotated.startswith("whsec_")

    header, body = await delivered_header(http, sealed_service, module_receiver, account, "+447911400001")
    assert independent_check(rotated, header, body) == [True, False]
    assert independent_check(created_secret, header, body) == [False, True]

    topics = await raw_topics(sealed_service)
    assert account.account_id.encode() in topics["accounts"]
    for name, raw in topics.items():
        for secret in (created_secret, rotated):
            # The random part alone too: no encoding of the prefix may hide a plaintext secret.
            assert secret.removeprefix("whsec_").encode() not in raw, name
        assert b"whsec_" not in raw, name
    records = [
        orjson.loads(r.value)
        for r in await read_topic(sealed_service.settings, sealed_service.settings.topic("accounts"))
    ]
    stored = [r["signing_secret"] for r in records if r["account_id"] == account.account_id and "signing_secret" in r]
    assert len(stored) == 2 and all(s.startswith("fernet:") for s in stored)


async def test_a_plain_secret_from_an_older_topic_still_signs(
    sealed_service: RunningService, module_receiver: Receiver, http: aiohttp.ClientSession
) -> None:
    settings = sealed_service.settings
    change = commands.create_account("guard", "from before sealing")
    record = stamp(change.record, now_ms())
    WRITTEN_PLAIN.add(record["account_id"])
    producer = make_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.topic("accounts"), orjson.dumps(record), key=record["account_id"].encode()
        )
    finally:
        await producer.stop()
    shown = change.shown
    account = AccountKeys(
        **{k: shown[k] for k in ("account_id", "key", "key_id", "ingest_token", "signing_secret", "plan")}
    )
    await wait_for_status(http, "GET", f"{sealed_service.base_url}/v1/account", 200, headers=account.headers)
    async with Admin(settings) as admin:
        assert (await admin.secret_show(account.account_id))["signing_secret"] == account.signing_secret
    header, body = await delivered_header(http, sealed_service, module_receiver, account, "+447911400002")
    assert independent_check(account.signing_secret, header, body) == [True]


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)


async def test_the_key_is_a_private_file_and_no_worker_is_given_it(sealed_service: RunningService) -> None:
    key_file = sealed_service.data_dir / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    (worker,) = role_pids(sealed_service, "worker")
    assert not {"CALLSCREEN_SECRET_KEY", "CALLSCREEN_SECRET_KEY_FILE"} & set(environ(worker))
    assert key not in Path(f"/proc/{worker}/environ").read_text()
    (alerting,) = role_pids(sealed_service, "alerting")
    assert environ(alerting)["CALLSCREEN_SECRET_KEY_FILE"] == str(key_file)
    log = sealed_service.data_dir.parent / f"{sealed_service.data_dir.name}.log"
    assert key not in log.read_text()
