"""A listing whose filter matches nothing reads a bounded number of index rows per partition
(`query_scan_max_rows`), answers a short page that says where to go on, and following its cursors finds
a match older than the bound once, in order (docs/api.md, Reads; `next_cursor` in schemas/openapi.json)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from domain.rules import HOUR_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import AccountKeys, RunningService, create_account, running_service
from tests.test_calls import get, post

pytestmark = pytest.mark.pipeline

SCAN_MAX_ROWS = 5
# One call an hour: every partition holds more rows than the bound.
CALLS = 40
TO = "+14155552671"


@pytest.fixture(scope="module")
def bounded_service(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {"CALLSCREEN_QUERY_SCAN_MAX_ROWS": str(SCAN_MAX_ROWS)}
    with running_service(tmp_path_factory.mktemp("read-flood") / "data", kafka, env=env) as running:
        yield running


def flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


def caller(n: int) -> str:
    return f"+1646770{n:04d}"


async def calls_of(
    http: aiohttp.ClientSession, service: RunningService, account: AccountKeys, query: str
) -> list[list[str]]:
    """Every page of `GET /v1/calls?<query>`, followed until `next_cursor` is null: each page's call ids."""
    pages: list[list[str]] = []
    url = f"{service.base_url}/v1/calls?{query}"
    while True:
        status, page = await get(http, url, account)
        assert status == 200, page
        assert set(page) == {"data", "next_cursor"}
        pages.append([c["call_id"] for c in page["data"]])
        if page["next_cursor"] is None:
            return pages
        # A hang guard: each page moves on by a whole hour of some partition at least.
        assert len(pages) <= CALLS, pages
        url = f"{service.base_url}/v1/calls?{query}&cursor={page['next_cursor']}"


@pytest.mark.timeout(180)
async def test_a_filter_that_matches_nothing_pages_within_the_bound(
    bounded_service: RunningService, http: aiohttp.ClientSession
) -> None:
    account = await create_account(bounded_service.settings, http, bounded_service.base_url)
    now = now_ms()
    newest_first = [f"flood-{n:02d}" for n in range(CALLS)]
    for n, call_id in enumerate(newest_first):
        body: dict[str, Any] = {
            "type": "call.started",
            "call_id": call_id,
            "to": TO,
            "from": caller(n),
            "at": format_ms(now - (n + 1) * HOUR_MS),
            # The oldest call, below every partition's bound from the top, is the one a filter looks for.
            "source": "needle" if n == CALLS - 1 else "hay",
        }
        status, answer = await post(http, bounded_service.base_url, account, body)
        assert (status, answer["call_id"]) == (200, call_id)

    status, first = await get(http, f"{bounded_service.base_url}/v1/calls?source=zzz&limit=200", account)
    assert status == 200
    assert first["data"] == [] and isinstance(first["next_cursor"], str)
    nothing = await calls_of(http, bounded_service, account, "source=zzz&limit=200")
    assert len(nothing) > 1 and flat(nothing) == []

    needle = await calls_of(http, bounded_service, account, "source=needle&limit=200")
    assert needle[0] == [] and flat(needle) == ["flood-39"]
    # No index by number: the number filter reads within the same bound and pages the same way.
    by_caller = await calls_of(http, bounded_service, account, f"number=%2B{caller(CALLS - 1)[1:]}&limit=200")
    assert by_caller[0] == [] and flat(by_caller) == ["flood-39"]

    # Everything, through short pages: each call once, newest first.
    every = await calls_of(http, bounded_service, account, "limit=200")
    assert flat(every) == newest_first
    assert len(every) > 1
