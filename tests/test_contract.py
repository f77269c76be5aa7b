"""The HTTP contract: schemathesis drives the live edge with the OpenAPI document the edge itself serves.

Every operation of the document is exercised with generated requests carrying real credentials (the
account's full key in the Authorization header, its ingest token in the events path for most cases),
and every response must be documented: no 5xx, a declared status code, content type, headers and body.
"""

from __future__ import annotations

import asyncio
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
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.service import AccountKeys, RunningService

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
}
# Operations that take a request body also get a negative pass: invalid bodies must be refused as documented.
WITH_BODY = {"PATCH /v1/account", "POST /v1/events", "POST /v1/events/{token}"}
POSITIVE_EXAMPLES = 40
NEGATIVE_EXAMPLES = 25
REQUEST_TIMEOUT_S = 10.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Calls started before the run, so that generated ends and turns also reach a known call.
KNOWN_CALL = {"to": "+14155550100", "from": "+12125550143"}


@dataclass
class Credentials:
    """What one operation's requests authenticate with, and a call it may name."""

    key: AccountKeys
    token: AccountKeys
    call_id: str


@dataclass
class Outcome:
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def start_call(http: aiohttp.ClientSession, base_url: str, account: AccountKeys, call_id: str) -> None:
    body = {"type": "call.started", "call_id": call_id, **KNOWN_CALL}
    async with http.post(f"{base_url}/v1/events", json=body, headers=account.headers) as response:
        assert response.status == 200, await response.text()


def uses_key(operation: schemathesis.APIOperation) -> bool:
    """Whether the document asks for a header credential (the operation's security, else the global one)."""
    security = operation.definition.raw.get("security", operation.schema.raw_schema.get("security", []))
    return bool(security)


def exercise(
    operation: schemathesis.APIOperation,
    mode: schemathesis.GenerationMode,
    examples: int,
    base_url: str,
    creds: Credentials,
    session: requests.Session,
    seen: Counter[int],
) -> None:
    """Up to `examples` generated requests against one operation, each validated against the document."""
    has_token = "{token}" in operation.path
    with_key = uses_key(operation)

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=operation.as_strategy(generation_mode=mode), knob=st.integers(min_value=0, max_value=3))
    def run(case: schemathesis.Case, knob: int) -> None:
        headers: dict[str, str] = {}
        # One case in four keeps whatever credential was generated (mostly refused: 401); the rest are real.
        if with_key and knob:
            headers = creds.key.headers
        if has_token and (knob or mode.is_negative):
            case.path_parameters = {**(case.path_parameters or {}), "token": creds.token.ingest_token}
        # Half of the event posts name a call that exists, so ends, turns and duplicate starts answer 200.
        if operation.path.startswith("/v1/events") and knob >= 2 and isinstance(case.body, dict):
            case.body["call_id"] = creds.call_id
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=REQUEST_TIMEOUT_S)
        seen[response.status_code] += 1
        case.validate_response(response, checks=CHECKS, headers=headers)

    run()


def run_contract(service: RunningService, creds: dict[str, Credentials]) -> Outcome:
    """The whole schemathesis run (synchronous: requests-based), meant for a worker thread."""
    schema = schemathesis.openapi.from_url(
        f"{service.base_url}/v1/openapi.json", config=schemathesis.Config(), timeout=REQUEST_TIMEOUT_S
    )
    # Schemathesis leaves out the operation that served the document unless a filter names it: name them all.
    schema = schema.include(path_regex="^/")
    outcome = Outcome()
    operations: dict[str, schemathesis.APIOperation] = {}
    for result in schema.get_all_operations():
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
                    exercise(operation, mode, examples, service.base_url, creds[label], session, seen)
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
    guard = Credentials(key=account, token=account, call_id="contract-guard")
    watch = Credentials(key=watch_account, token=watch_account, call_id="contract-watch")
    creds = {label: guard for label in OPERATIONS} | {"POST /v1/events/{token}": watch}

    outcome = await asyncio.to_thread(run_contract, service, creds)

    print(outcome.statuses)  # DEBUG
    assert not outcome.failures, "\n\n".join(outcome.failures)
    for label in sorted(OPERATIONS):
        assert outcome.statuses[label].get(200), f"{label} never answered 200: {dict(outcome.statuses[label])}"


async def test_served_document_is_the_file_on_disk(service: RunningService, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{service.base_url}/v1/openapi.json") as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        served = await response.read()
    assert served == DOCUMENT.read_bytes()
    document: dict[str, Any] = orjson.loads(served)
    assert document["openapi"] == "3.1.0"
