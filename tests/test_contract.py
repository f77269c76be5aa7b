"""The HTTP contract: schemathesis drives the live edge with the OpenAPI document the edge itself serves.

Every operation of the document is exercised with generated requests carrying real credentials (the
account's full key in the Authorization header, its ingest token in the events path for most cases),
and every response must be documented: no 5xx, a declared status code, content type, headers and body.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from callscreen.admin import Admin
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService
from tests.test_alerts import Traffic

pytestmark = pytest.mark.pipeline

DOCUMENT = Path(__file__).resolve().parent.parent / "schemas" / "openapi.json"
OPERATIONS = {
    "GET /healthz",
    "GET /metrics",
    "GET /v1/openapi.json",
    "GET /v1/account",
    "PATCH /v1/account",
    "POST /v1/events",
    "POST /v1/events/{token}",
    "POST /v1/ingest/{platform}",
    "POST /v1/ingest/{platform}/{token}",
    "GET /v1/calls",
    "GET /v1/calls/{call_id}",
    "POST /v1/calls/{call_id}/label",
    "GET /v1/numbers",
    "GET /v1/score",
    "GET /v1/reputation/{number}",
    "GET /v1/alerts",
    "GET /v1/alerts/{alert_id}",
    "GET /v1/evaluation",
    "POST /v1/gate/{token}",
    "POST /v1/gate/{token}/challenge",
    "POST /v1/gate/{token}/status",
    "POST /v1/shadow",
    "GET /v1/shadow/{shadow_id}",
}
# What each operation answers when it does what it is for, when that is not 200.
SUCCESS = {"POST /v1/shadow": 202}
# Operations that take a request body also get a negative pass: invalid bodies must be refused as documented.
WITH_BODY = {
    "PATCH /v1/account",
    "POST /v1/events",
    "POST /v1/events/{token}",
    "POST /v1/ingest/{platform}",
    "POST /v1/ingest/{platform}/{token}",
    "POST /v1/calls/{call_id}/label",
    "POST /v1/shadow",
}
# Enough to reach every documented answer of each operation; `make fuzz` sends 10,000 requests.
POSITIVE_EXAMPLES = 25
NEGATIVE_EXAMPLES = 15
REQUEST_TIMEOUT_S = 10.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
Operation = schemathesis.APIOperation[Any, Any, Any, Any]
Case = schemathesis.Case[Any]
# Readable numbers for some of the generated starts; the first two make the call started before the run.
# The guard account's Vapi integration: its token path's posts carry Vapi's legacy `x-vapi-secret`.
VAPI_SECRET = "contract-vapi-secret"
# A Vapi message of the call started before the run: a platform post the adapter maps (a cut-in, 200).
VAPI_MESSAGE: dict[str, Any] = {"message": {"type": "user-interrupted", "call": {"id": "contract-guard"}}}
NUMBERS = ("+14155550100", "+12125550143", "+442079460123", "+33142685300", "+4930901820", "+61293744000")


@dataclass
class Target:
    """The account one operation's requests authenticate as (key or ingest token), a call and an alert of it."""

    account: AccountKeys
    call_id: str
    alert_id: str = ""
    # The gate's operations take a number's gate token in the path instead of the ingest token.
    gate_token: str = ""
    shadow_id: str = ""


@dataclass
class Outcome:
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def start_call(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str) -> None:
    body = {"type": "call.started", "call_id": call_id, "to": NUMBERS[0], "from": NUMBERS[1]}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as response:
        assert response.status == 200, await response.text()


async def gated_call(service: RunningService, http: aiohttp.ClientSession, account: AccountKeys) -> Target:
    """A gate token for the first number, and a call started through the gate before the run."""
    async with Admin(service.settings) as admin:
        token = (await admin.token_rotate(account.account_id, "gate", NUMBERS[0]))["token"]
    call_sid = "CA" + "0" * 32
    form = {"CallSid": call_sid, "From": NUMBERS[1], "To": NUMBERS[0], "StirVerstat": "TN-Validation-Failed-A"}
    deadline = time.monotonic() + 1.0
    while True:
        async with http.post(f"{service.base_url}/v1/gate/{token}", data=form) as response:
            if response.status == 200:
                return Target(account, call_sid, gate_token=token)
        assert time.monotonic() < deadline, "the edge did not learn the gate token in time"
        await asyncio.sleep(0.02)


async def shadow_run(http: aiohttp.ClientSession, service: RunningService, account: AccountKeys) -> str:
    """A shadow run of the account's last hour, asked for before the run: a run to read back."""
    until = now_ms()
    body = {"since": format_ms(until - 3_600_000), "until": format_ms(until), "policy": {}}
    async with http.post(f"{service.base_url}/v1/shadow", json=body, headers=account.headers) as response:
        assert response.status == 202, await response.text()
        return str((await response.json())["id"])


def uses_key(operation: Operation) -> bool:
    """Whether the document asks for a header credential (the operation's security, else the global one)."""
    security = operation.definition.raw.get("security", operation.schema.raw_schema.get("security", []))
    return bool(security)


def exercise(
    operation: Operation,
    mode: schemathesis.GenerationMode,
    examples: int,
    base_url: str,
    target: Target,
    session: requests.Session,
    seen: Counter[int],
) -> None:
    """Up to `examples` generated requests against one operation, each validated against the document."""
    with_key = uses_key(operation)
    with_token = "{token}" in operation.path
    is_event = operation.path.startswith("/v1/events")
    is_gate = operation.path.startswith("/v1/gate")
    is_platform = operation.path.startswith("/v1/ingest")

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(
        case=operation.as_strategy(generation_mode=mode),
        forged=st.integers(min_value=0, max_value=3),
        steer=st.integers(min_value=0, max_value=2),
        pick=st.integers(min_value=0, max_value=len(NUMBERS) - 1),
    )
    def run(case: Case, forged: int, steer: int, pick: int) -> None:
        # About one case in four keeps the credential that was generated (refused: 401); the rest send real ones.
        real = forged != 3
        headers = target.account.headers if with_key and real else {}
        if is_platform and with_token and real:
            headers = {"x-vapi-secret": VAPI_SECRET}
        if with_token and (real or mode.is_negative):
            token = target.gate_token if is_gate else target.account.ingest_token
            case.path_parameters = {**(case.path_parameters or {}), "token": token}
        if steer == 1:
            # Ids and numbers that exist, so that reads of one record answer 200 as well as 404.
            known = {
                "call_id": target.call_id,
                "alert_id": target.alert_id,
                "number": NUMBERS[pick],
                "shadow_id": target.shadow_id,
            }
            params = case.path_parameters or {}
            case.path_parameters = {k: known.get(k, v) for k, v in params.items()}
            if operation.path == "/v1/score" and isinstance(case.query, dict):
                case.query = {**case.query, "to": NUMBERS[pick], "from": NUMBERS[-1 - pick]}
        if operation.path == "/v1/calls/{call_id}/label" and steer == 2:
            # A label answers 200 only for a call that exists: two cases in three label one, not one in three,
            # so that a draw short of steer 1 still reaches the 200.
            case.path_parameters = {**(case.path_parameters or {}), "call_id": target.call_id}
        if operation.path == "/v1/shadow" and steer == 1 and not mode.is_negative:
            # A window a run may have: generated times are almost never less than 31 days apart, in order.
            until = now_ms()
            case.body = {"since": format_ms(until - 3_600_000), "until": format_ms(until), "policy": {}}
        if is_event and isinstance(case.body, dict):
            if steer != 0:
                # A generated `at` is almost never within the day a live event may be old: take the receipt time.
                case.body.pop("at", None)
            if steer == 1:
                # A call that exists: ends and turns answer 200, a start answers its first decision again.
                case.body["call_id"] = target.call_id
            elif steer == 2 and case.body.get("type") == "call.started":
                # Readable numbers, so that starts get scored (or meet the plan's number cap).
                case.body["to"], case.body["from"] = NUMBERS[pick], NUMBERS[-1 - pick]
        if is_platform and steer == 1:
            # A platform that exists and a message of it that maps: the post answers 200 with its events.
            case.path_parameters = {**(case.path_parameters or {}), "platform": "vapi"}
            case.body, case.media_type = dict(VAPI_MESSAGE), "application/json"
        if is_gate and steer == 1 and isinstance(case.body, dict):
            # The gated call started before the run: a keypress and a status callback for it answer 200.
            case.body["CallSid"] = target.call_id
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=REQUEST_TIMEOUT_S)
        seen[response.status_code] += 1
        case.validate_response(response, checks=CHECKS, headers=headers)

    run()


def run_contract(service: RunningService, targets: dict[str, Target]) -> Outcome:
    """The whole schemathesis run (synchronous: requests-based), meant for a worker thread."""
    loaded = schemathesis.openapi.from_url(
        f"{service.base_url}/v1/openapi.json", config=schemathesis.Config(), timeout=REQUEST_TIMEOUT_S
    )
    # Schemathesis leaves out the operation that served the document unless a filter names it: name them all.
    schema = loaded.include(path_regex="^/")
    outcome = Outcome()
    operations: dict[str, Operation] = {}
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"an operation of the document does not load: {result.err()}"
        operation = result.ok()
        operations[operation.label] = operation
    assert set(operations) == OPERATIONS, f"the served document has {sorted(operations)}"
    with requests.Session() as session:
        for label, operation in operations.items():
            seen = outcome.statuses.setdefault(label, Counter())
            passes = [(schemathesis.GenerationMode.POSITIVE, POSITIVE_EXAMPLES)]
            if label in WITH_BODY:
                passes.append((schemathesis.GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES))
            for mode, examples in passes:
                try:
                    exercise(operation, mode, examples, service.base_url, targets[label], session, seen)
                except Exception as exc:
                    outcome.failures.append(f"{label} ({mode.value}):\n{exc}")
    return outcome


async def test_live_edge_conforms_to_its_openapi_document(
    service: RunningService,
    http: aiohttp.ClientSession,
    account: AccountKeys,
    watch_account: AccountKeys,
) -> None:
    # The guard account posts with its key; the watch account with its token (its turns answer `ignored`).
    await start_call(http, service.base_url, account, "contract-guard")
    await start_call(http, service.base_url, watch_account, "contract-watch")
    # Six starts from one caller inside ten minutes raise `caller.rate_exceeded`: an alert to read back.
    calls = Traffic(http, service, account)
    for minute in range(6):
        await calls.start(NUMBERS[2], minute)
    (alert,) = await calls.wait_for("caller.rate_exceeded")
    guard = Target(account, "contract-guard", alert["id"], shadow_id=await shadow_run(http, service, account))
    gated = await gated_call(service, http, account)
    async with Admin(service.settings) as admin:
        await admin.integration_set(account.account_id, "vapi", VAPI_SECRET)
    targets = {label: gated if "/v1/gate" in label else guard for label in OPERATIONS} | {
        "POST /v1/events/{token}": Target(watch_account, "contract-watch"),
        # An account with no run yet: its first run answers 202, those after it 409 while it runs.
        "POST /v1/shadow": Target(watch_account, "contract-watch"),
    }

    outcome = await asyncio.to_thread(run_contract, service, targets)

    assert not outcome.failures, "\n\n".join(outcome.failures)
    for label in sorted(OPERATIONS):
        success = SUCCESS.get(label, 200)
        assert outcome.statuses[label].get(success), (
            f"{label} never answered {success}: {dict(outcome.statuses[label])}"
        )


async def test_served_document_is_the_file_on_disk(service: RunningService, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{service.base_url}/v1/openapi.json") as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        served = await response.read()
    assert served == DOCUMENT.read_bytes()
    document: dict[str, Any] = orjson.loads(served)
    assert document["openapi"] == "3.1.0"
