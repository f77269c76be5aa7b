"""Records read back conform to the OpenAPI document, whatever the events carried within the contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson
from jsonschema import Draft202012Validator

from tests.service import AccountKeys

DOCUMENT: dict[str, Any] = orjson.loads((Path(__file__).resolve().parents[2] / "schemas" / "openapi.json").read_bytes())


def violations(component: str, value: object) -> list[str]:
    """Why `value` does not validate against one of the document's schemas (none when it does)."""
    schema = {"$ref": f"#/components/schemas/{component}", "components": DOCUMENT["components"]}
    return [error.message for error in Draft202012Validator(schema).iter_errors(value)]


async def test_a_call_record_keeps_attrs_as_sent_and_still_conforms(
    http: aiohttp.ClientSession, base_url: str, account: AccountKeys
) -> None:
    # The named keys typed and within their caps, a null dropped, an unknown key kept as sent.
    attrs = {"tokens": {"in": 12}, "geo": {"city": "Austin"}, "caller_name": None, "attestation": "b", "extra": [1]}
    start = {"type": "call.started", "call_id": "c-attrs", "to": "+14155552671", "from": "+12125550123"}
    async with http.post(f"{base_url}/v1/events", json={**start, "attrs": attrs}, headers=account.headers) as r:
        assert r.status == 200, await r.text()
    async with http.get(f"{base_url}/v1/calls/c-attrs", headers=account.headers) as r:
        assert r.status == 200
        record = await r.json()
    assert record["attrs"] == {"tokens": {"in": 12}, "geo": {"city": "Austin"}, "attestation": "B", "extra": [1]}
    assert violations("CallRecord", record) == []
