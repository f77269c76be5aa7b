"""The alert store and billing agents: alerts become listable; failed payments become alerts."""

from __future__ import annotations

from typing import Any

import orjson

from callscreen.times import parse_ms
from processors.alerts import make_alert
from processors.runtime import Runtime

MIN_MS = 60_000


def register(rt: Runtime) -> None:
    rt.table("alert_store")
    rt.table("billing")

    @rt.app.agent(rt.topic("alerts"), concurrency=1)
    async def store_alerts(stream: Any) -> None:
        async for event, _ in rt.folds(stream, "alerts"):
            alert = orjson.loads(event.value)
            rt.folded("alerts", event)
            account, alert_id = alert["account_id"], alert["id"]
            key = f"alert|{account}|{alert_id}"
            if rt.read("alert_store", key) is not None:
                continue
            rt.write("alert_store", key, alert)
            created = parse_ms(alert["created_at"]) or 0
            partition = event.message.partition
            entry = [created, alert_id, alert["type"]]
            rt.index("alert_store", account, partition, entry, "alerts")

    @rt.app.agent(rt.topic("billing"), concurrency=1)
    async def billing(stream: Any) -> None:
        async for event, _ in rt.folds(stream, "billing"):
            record = orjson.loads(event.value)
            replay = rt.folded("billing", event)
            if record.get("kind") != "payment.failed":
                continue
            account, at = record["account_id"], int(record["at"])
            last = rt.read("billing", account)
            if last is not None and (
                last["id"] == record["id"] or at - last["at"] < rt.detectors.cooldown_min * MIN_MS
            ):
                continue
            rt.write("billing", account, {"id": record["id"], "at": at})
            data = {"amount_cents": record["amount_cents"], "attempt": record["attempt"]}
            if not replay:
                alert = make_alert(account, "billing.payment_failed", account, at, at, data)
                await (await rt.send("alerts", account, alert))
