"""The detector agent: folds the decisions topic, keyed by account and protected number.

Each number's window state and cooldowns live in the `number_windows` table; alerts go to the
alerts topic, blocks and active patterns back to the decisions topic as facts, where every
worker's feature view picks them up for the score.
"""

from __future__ import annotations

from typing import Any

import orjson

from processors import detectors
from processors.alerts import make_alert
from processors.runtime import Runtime

MIN_MS = 60_000


def register(rt: Runtime) -> None:
    rules = rt.detectors
    rt.table("number_windows")

    @rt.app.agent(rt.topic("decisions"), concurrency=1)
    async def detect(stream: Any) -> None:
        async for event, pending in rt.folds(stream, "decisions"):
            replay = rt.folded("decisions", event)
            await fold_fact(event, pending, replay)
            rt.detector_folded(event.message.partition, event.message.offset)

    async def fold_fact(event: Any, pending: list[Any], replay: bool) -> None:
        fact = orjson.loads(event.value)
        if fact.get("kind") not in ("call.decided", "call.settled"):
            return
        key = event.key.decode()
        state = rt.read("number_windows", key) or detectors.new_state()
        found = detectors.observe(state, fact, rules)
        rt.write("number_windows", key, state)
        if replay:
            # Alerts, blocks and patterns of a replayed fact are already in the log.
            return
        for detection in found:
            account = fact["account_id"]
            alert = make_alert(
                account, detection.type, detection.subject, detection.window_start, detection.at, detection.data
            )
            if detection.raised:
                pending.append(await rt.send("alerts", account, alert))
            for placed in consequences(fact, detection, alert["id"], rules):
                pending.append(await rt.send("decisions", key, placed))
                rt.view.apply(placed)


def consequences(
    fact: dict[str, Any], detection: detectors.Detection, alert_id: str, rules: detectors.DetectorRules
) -> list[dict[str, Any]]:
    """The block and pattern facts a detection places, with ids that make re-applying them a no-op."""
    base = {"account_id": fact["account_id"], "number": fact["number"], "alert_id": alert_id}
    placed = [
        {
            **base,
            "kind": "block.placed",
            "id": f"{alert_id}:{caller}",
            "caller": caller,
            "reason": detection.type,
            "since": detection.window_start,
            "until": detection.window_start + rules.block_min * MIN_MS,
            "at": detection.at,
        }
        for caller in detection.blocks
    ]
    if detection.pattern is not None:
        pattern = detection.pattern
        placed.append(
            {
                **base,
                "kind": "pattern.active",
                "id": f"{alert_id}:pattern:{pattern['until']}",
                "pattern": pattern["kind"],
                "match": pattern["match"],
                "width": pattern.get("width"),
                "since": detection.at,
                "until": pattern["until"],
                "at": detection.at,
            }
        )
    return placed
