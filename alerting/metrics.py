"""The alerting role's Prometheus instruments: deliveries by outcome, their duration, consumer lag."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

from infra.metrics import lag_gauge

DELIVERY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0)


@dataclass
class AlertingMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.deliveries = Counter(
            "callscreen_deliveries_total",
            "Alerts handled, by outcome: delivered, an error (status_<code>, timeout, refused, tls), "
            "skipped (no webhook URL), rate_limited, queue_full, or stale (older than every alert the role "
            "remembers, alerting_seen_max: taken as handled, never sent).",
            ["outcome"],
            registry=self.registry,
        )
        self.delivery_seconds = Histogram(
            "callscreen_delivery_seconds",
            "Webhook POST duration, whatever the outcome.",
            buckets=DELIVERY_BUCKETS,
            registry=self.registry,
        )
        self.channel_messages = Counter(
            "callscreen_channel_messages_total",
            "Email, text and voice messages, by channel and outcome: delivered, an error (smtp_<code>, "
            "status_<code>, timeout, refused) or skipped_<reason> (floor, rate, unavailable, queue_full).",
            ["channel", "outcome"],
            registry=self.registry,
        )
        self.hang_ups = Counter(
            "callscreen_hang_ups_total",
            "Gated calls the carrier was asked to end (`hang_up_suspicious`), by outcome: ended, an error "
            "(status_<code>, timeout, refused) or unconfigured (no carrier credentials).",
            ["outcome"],
            registry=self.registry,
        )
        self.lag = lag_gauge(self.registry)


def outcome_label(delivered: bool, status: int | None, error: str | None) -> str:
    if delivered:
        return "delivered"
    if error:
        return error
    return f"status_{status}" if status is not None else "failed"
