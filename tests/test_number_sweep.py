"""A number's spike ends with the first quiet hour after it, ticked by the worker's sweep with no further
call (`domain.detectors.sweep_due`, `tick_after`), through the real edge, Kafka and worker.

The hours pass on the sweeps' clock alone (`Settings.sweep_clock_ahead_ms`): the calls are reported as they
happen, stamped by the edge's wall clock, so the number's ticks wait for nothing but the hours' ends.
tests/scenarios/volume_spike.yaml holds the same rule for the pure folds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from domain.rules import HOUR_MS, MIN_MS
from domain.times import format_ms
from infra.clock import now_ms
from tests.service import RunningService, create_account, running_service
from tests.test_alerts import Traffic

pytestmark = pytest.mark.slow

NUMBER = "+14155552671"
# Twenty callers, one area code each: no two share a prefix, a rotation or a caller's rate.
AREAS = (212, 310, 415, 646, 702, 305, 312, 617, 206, 404, 503, 713, 214, 602, 615, 720, 813, 919, 704, 916)
AHEAD_MS = 3 * HOUR_MS


@pytest.fixture(scope="module")
def sweep_ahead(kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    env = {"CALLSCREEN_SWEEP_CLOCK_AHEAD_MS": str(AHEAD_MS), "CALLSCREEN_EVENTS_PER_MINUTE": "100000"}
    with running_service(tmp_path_factory.mktemp("ahead") / "data", kafka, env=env) as running:
        yield running


async def test_a_spike_ends_with_the_next_quiet_hour_by_the_sweep_alone(
    sweep_ahead: RunningService, http: aiohttp.ClientSession
) -> None:
    service = sweep_ahead
    account = await create_account(service.settings, http, service.base_url)
    now = now_ms()
    hour = now - now % HOUR_MS
    # Twenty calls within this hour, none after now: against a new number's baseline (its floor of five
    # calls an hour) the twentieth is a spike (docs/rules.md, `CALLSCREEN_DETECT_SPIKE_*`).
    times = [hour + (now - hour) * i // len(AREAS) for i in range(1, len(AREAS) + 1)]
    for i, (area, at) in enumerate(zip(AREAS, times, strict=True)):
        body: dict[str, Any] = {
            "type": "call.started",
            "call_id": f"s{i}",
            "to": NUMBER,
            "from": f"+1{area}770{1000 + i}",
            "at": format_ms(at),
        }
        async with http.post(f"{service.base_url}/v1/events", json=body, headers=account.headers) as r:
            assert r.status == 200, await r.text()
        ended = {"type": "call.ended", "call_id": f"s{i}", "at": format_ms(at)}
        async with http.post(f"{service.base_url}/v1/events", json=ended, headers=account.headers) as r:
            assert r.status == 200, await r.text()
    seen = Traffic(http, service, account)
    (normal,) = await seen.wait_for("number.volume_normal", timeout_s=20.0)
    (spike,) = await seen.alerts("number.volume_spike")
    assert spike["data"] == {"number": NUMBER, "calls": 20, "callers": 20, "expected": 5.0}
    # The spike's hour ticked at its end changed nothing; the next, quiet, ended it at its own end, in
    # event time: two hours after the spike's hour began, whenever the sweep ran.
    ended_at = hour + 2 * HOUR_MS
    assert normal["data"] == {
        "number": NUMBER,
        "minutes": (ended_at - times[-1]) // MIN_MS,
        "peak": 20,
        "expected": 5.0,
    }
    assert normal["created_at"] == format_ms(ended_at)
