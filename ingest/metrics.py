"""Prometheus instruments of the edge, on a registry of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


@dataclass
class EdgeMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _children: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.requests = Counter(
            "callscreen_http_requests_total",
            "HTTP requests by route and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "callscreen_http_request_seconds",
            "HTTP request latency by route and status.",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.gate_unscored = Counter(
            "callscreen_gate_unscored_total",
            "Gated calls answered with no score (the number's unavailable choice: forward or reject).",
            ["choice"],
            registry=self.registry,
        )
        self.events = Counter(
            "callscreen_events_appended_total",
            "Events appended to the log, by type.",
            ["type"],
            registry=self.registry,
        )
        self.answers = Histogram(
            "callscreen_answer_seconds",
            "Time from append to the worker's answer, by event type.",
            ["type"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.admin_applied = Counter(
            "callscreen_admin_changes_applied_total",
            "Account-stream records folded by this edge.",
            ["kind"],
            registry=self.registry,
        )
        # By reason only (`account_full`, `host_full`): account ids and hosts are too many for labels.
        self.gate_forwards_refused = Counter(
            "callscreen_gate_forwards_refused_total",
            "Gate forwards refused before they were sent, their account's or host's share being full.",
            ["reason"],
            registry=self.registry,
        )
        self.event_turns_refused = Counter(
            "callscreen_event_turns_refused_total",
            "Events answered 503 unappended: their account's queue at this edge was full, or their turn late.",
            ["reason"],
            registry=self.registry,
        )
        self.accounts = Gauge("callscreen_accounts", "Accounts known to this edge.", registry=self.registry)

    def child(self, metric: MetricWrapperBase, *values: str) -> Any:
        """`metric.labels(*values)`, looked up once per label set.

        Every request and every event looks up two or four children, and prometheus_client's lookup
        (checks, a lock) was 2.6 % of the edge's samples at 1,500 turns a second
        (docs/decisions/0018-partitions-by-murmur2-in-c.md). The label sets are few: routes, methods, statuses,
        types.
        """
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found
