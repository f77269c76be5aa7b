"""One typed settings object, read from the environment and optional TOML files.

The deployment's own settings have their defaults here; the rules of the service (scores,
flags, detectors, plans, limits) take theirs from `domain.rules`, and are overridden the same way.
Each scalar is an environment variable, `CALLSCREEN_` + its name in upper case; a rule's name is
its concern's prefix and its field (`CALLSCREEN_LIVE_SILENT_S`, `CALLSCREEN_DETECT_RATE_CALLS`,
`CALLSCREEN_SCORING_REJECT`, `CALLSCREEN_EVENTS_PER_MINUTE`). TOML files (`CALLSCREEN_CONFIG`, or
`callscreen.toml` in the working directory, then `CALLSCREEN_POLICY_FILE`) use the same names, or
a table per concern (`[live]`, `[scoring.weights]`). The environment wins; docs/rules.md lists every rule.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from domain.rules import HOUR_MS, DetectorRules, LimitRules, LiveRules, PlanRules, Rules, ScoringRules
from domain.store import MAX_VALUE_BYTES

# `--broker memory`: the in-memory development broker, which `run` then names with this scheme so every
# client knows to apply its workarounds (infra/kafka.py).
MEMORY_BROKER = "memory"
MEMORY_SCHEME = "tansu://"

# Each concern of `Rules`: its settings prefix and its class.
CONCERNS: dict[str, tuple[str, type[Any]]] = {
    "scoring": ("scoring_", ScoringRules),
    "live": ("live_", LiveRules),
    "detectors": ("detect_", DetectorRules),
    "plans": ("", PlanRules),
    "limits": ("", LimitRules),
}


@dataclass(frozen=True)
class Settings:
    # Process and broker.
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: str = "./data"
    # "" starts the local Apache Kafka under data_dir; "memory" the in-memory development broker;
    # "kafka://host:port[,host:port]" names a cluster (README, The broker).
    broker: str = ""
    # Client security for a named cluster, for every role and admin command alike.
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str = ""
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = ""
    kafka_ca_file: str = ""
    # Topics the service creates itself.
    replication_factor: int = 1
    min_insync_replicas: int = 1
    # The local Apache Kafka: its jar cache (default ~/.cache/callscreen/kafka-<version>) and heap.
    kafka_home: str = ""
    kafka_heap_mb: int = 512
    # Options for the local Kafka's JVMs, split like a shell's words. The test suite passes
    # `-XX:TieredStopAtLevel=1`: its brokers live a minute or so, and the optimizing compiler's threads
    # took a fifth of the CPU of a traffic test (tests/service.py, `QUICK_JVM`).
    kafka_jvm_options: str = ""
    partitions: int = 4
    reply_partitions: int = 8
    # Answers go straight back to the asking edge over TCP (the replies topic is the fallback). The edge
    # listens on `host`, an ephemeral port, and tells workers `reply_host` (default: `host`, or this
    # machine's name when `host` is a wildcard).
    direct_replies: bool = True
    reply_host: str = ""
    # The reply listener binds here: loopback or a private address only (default: `host` when it is one,
    # else 127.0.0.1). Workers prove themselves with the shared `reply_token` (`callscreen run` makes
    # one); without a token answers take the replies topic.
    reply_bind: str = ""
    reply_token: str = field(default="", repr=False)
    topic_prefix: str = "callscreen"
    app_id: str = "callscreen-worker"
    log_level: str = "INFO"
    # "text": short lines for a person at a terminal; "json": one object a line, for a log pipeline;
    # "auto": text when the log goes to a terminal, else json.
    log_format: str = "auto"
    # Every process's event loop: "uvloop" (libuv's) or "asyncio" (the standard library's selector loop).
    event_loop: str = "uvloop"
    workers: int = 1
    worker_index: int = 0
    role: str = "all"
    # The alerting role's static member id in its consumer group (`infra/membership.py`). `callscreen run`
    # names its own alerting child after the host and the data directory; empty, a dynamic member. Two
    # alerting roles of one group must not share an id: the second to join would fence the first.
    alerting_instance: str = ""
    # Prometheus port of a worker or alerting process (0: none). Under `callscreen run` worker N takes
    # metrics_port + N and the alerting role metrics_port + workers; the edge serves /metrics on `port`.
    metrics_port: int = 0
    # The edge's /metrics on a port of its own (0: on the API port, beside the API).
    edge_metrics_port: int = 0
    # Answer path.
    answer_deadline_s: float = 2.0
    # An account's events awaiting their answer at one edge, and its events waiting their turn behind them
    # (ingest/event_turns.py, decision 0037): one account's burst waits behind its own events at the edge,
    # not in the log ahead of every account's. A turn not had within the answer deadline, or a full queue,
    # is a 503 with nothing appended.
    events_in_flight_per_account: int = 2
    events_waiting_per_account: int = 256
    # How long the edge holds a refusal for being over a limit (429, and a worker's 503 for an account whose
    # questions are full) before it sends it, at most its Retry-After: a client looping on refusals asks a
    # few times a second, not thousands, and the edge's core stays the other accounts' (decision 0036).
    refusal_hold_s: float = 1.0
    # Index rows a listing question reads in one partition before it answers a short page that says where
    # it stopped: a filter that matches nothing cannot hold the worker's loop through 400 days of rows.
    query_scan_max_rows: int = 500
    # Questions taken off the feed and not yet acknowledged, counted apart from the folds'
    # (`worker_unacknowledged_max`): past it the questions wait, never the folds.
    query_unacknowledged_max: int = 1024
    # The share of a worker's event loop that answering questions may take; the folds keep the rest however
    # many questions wait (processors/folds/queries.py). Past it, the questions wait out the edge's deadline.
    query_loop_share: float = 0.25
    # Questions waiting for their turn at a worker, per account and in all. The account that has had the least
    # answering time goes first (processors/folds/queries.py, `Waiting`), so one account's flood waits behind
    # its own questions, never another's; past either bound a new question is refused at once (503) rather
    # than left to wait out the edge's deadline.
    query_waiting_per_account: int = 64
    query_waiting_max: int = 1024
    # The share of a core a shadow run may take while it folds (shadow/service.py): past it the run waits,
    # so on cores shared with the workers their answers keep their time whatever the run reads.
    shadow_cpu_share: float = 0.5
    # Runs folding at once, each of another account, sharing that one share: one account's long run never
    # holds another's back behind it; past it runs wait their turn in the order they were asked for.
    shadow_concurrent_runs: int = 4
    # The longest a broker holds a fetch that finds nothing new; one that finds a record returns at once.
    fetch_max_wait_ms: int = 500
    # The same for the consumer a worker folds its topics with. A broker holds one fetch per connection at a
    # time: a long poll on its quiet partitions keeps the busy ones, whose records were being folded when it
    # was sent, from being fetched again until it ends (docs/architecture.md, "The long poll").
    worker_fetch_max_wait_ms: int = 20
    # Records each of a worker's folds may hold fetched and not yet folded (its feed, processors/faust/feed.py).
    # One poll hands over at most a fifth of it per partition, so a backlog never fills it
    # (docs/architecture.md, "Backlogs").
    worker_stream_buffer: int = 4096
    # Events a worker may have folded whose appends and changelog records the broker has not yet
    # acknowledged; past it the folds wait. Without a bound a backlog is folded faster than the broker
    # acknowledges what the folds append, and each such event, its record and its appends stay in memory
    # (docs/decisions/0023-unacknowledged-bound-at-4096.md, with the larger bounds tried).
    worker_unacknowledged_max: int = 4096
    # A worker sends its tables' changed keys to their changelogs this often, each key's last value once.
    changelog_flush_ms: int = 200
    # A worker writes its RocksDB memtables to disk this often (processors/folds/commits.py, `checkpoint`): a kill
    # loses only what came since, and the next start recovers that from the changelogs, not every table.
    table_checkpoint_s: float = 10.0
    # The largest table row a fold may write; a record whose fold would write more is dead-lettered. Keep it
    # under the broker's message.max.bytes (1 MiB by default); the folds stay far below it (domain/store.py).
    max_value_bytes: int = MAX_VALUE_BYTES
    # One block cache for all of a worker's RocksDB databases; their memtables are charged to it.
    rocksdb_memory_mb: int = 32
    # Table rows a worker keeps decoded after reading or writing them, by their encoded size (the decoded
    # structs take a few times more). Room for the rows of the calls a burst leaves open: at 4 MB the
    # worker decoded most rows again after an overload (docs/decisions/0017-call-rows-kept-decoded.md).
    # `row_cache_check` decodes every kept struct, and every value the feature view keeps as it
    # was put, again and fails on a difference: for tests, not for production.
    row_cache_mb: int = 16
    row_cache_check: bool = False
    # How often the sweep looks for calls and numbers a rule may trip without a further event.
    silent_sweep_s: float = 1.0
    # How far ahead of the wall clock the sweeps' clock runs: 0 in service. A test of a rule that trips
    # hours after its calls (a number's spike ends with the next quiet hour) sets it instead of waiting the
    # hours out (tests/test_number_sweep.py).
    sweep_clock_ahead_ms: int = 0
    policy_file: str = ""
    # Webhooks (docs/api.md, Alert delivery).
    webhook_timeout_s: float = 8.0
    webhook_ca_file: str = ""
    webhook_allow_private: bool = False
    # Ports a webhook URL may name, comma-separated; "*" allows any (checked on PATCH and at delivery).
    webhook_ports: str = "443,8443"
    # The longest a webhook host's DNS lookup may take before the delivery gives up with `timeout`.
    webhook_dns_timeout_s: float = 2.0
    # A host name whose lookup timed out or failed fails again at once, without a query, for this long.
    webhook_dns_negative_ttl_s: float = 30.0
    # Name servers for those lookups, comma-separated `address[:port]`; empty: the system's (resolv.conf).
    webhook_dns_servers: str = ""
    # POSTs in flight at once: overall, and per account, so one account's slow receiver cannot take them all.
    webhook_concurrency: int = 32
    webhook_account_concurrency: int = 4
    # Alerts one account may have waiting for a slot; past it an alert is skipped (`queue_full`).
    webhook_queue_limit: int = 1000
    # Alerts one account may have delivered per minute of their `created_at`; past it `rate_limited`.
    alerts_per_minute: int = 60
    # Alerts (and messages, and hang-ups) the alerting role remembers as handled, the oldest by `created_at`
    # forgotten first (domain/seen.py): one older than every alert kept counts as handled, never sent twice.
    alerting_seen_max: int = 100_000
    # The carrier gate (docs/api.md, The carrier gate). `public_url` is the scheme and host the carrier
    # reaches the edge by (`https://screen.example.com`), when a TLS terminator or proxy stands between:
    # X-Twilio-Signature signs the URL the carrier called. Empty: the URL the edge received.
    public_url: str = ""
    # A forward to the platform's voice URL: no answer within this many seconds counts as failed.
    gate_forward_timeout_s: float = 10.0
    # Forwards in flight at once per account and per host (name and port): past either the call gets the
    # apology at once, so one account's hung platform or forged posts hold its own share only. A host's is
    # larger, as several accounts' numbers may forward to one platform.
    gate_forwards_per_account: int = 20
    gate_forwards_per_host: int = 100
    # Seconds the carrier waits for the challenge's keypress.
    gate_challenge_timeout_s: int = 6
    # The carrier's REST API, for ending a gated call (`hang_up_suspicious`): its base URL (a local
    # stand-in in tests), the deployment's account and auth token (never in a repr), and the time-out.
    twilio_api_base: str = "https://api.twilio.com"
    twilio_account_sid: str = ""
    twilio_auth_token: str = field(default="", repr=False)
    carrier_timeout_s: float = 8.0
    # Email, text and voice alerts (docs/api.md, Alert channels). The SMTP server's URL carries its
    # password, so it is never in a repr; without it (or without the carrier's SID, token and sender
    # number) the channel is unavailable and every message it would have sent is recorded as skipped.
    smtp_url: str = field(default="", repr=False)
    email_from: str = ""
    email_timeout_s: float = 10.0
    twilio_from: str = ""
    # Per account, counted over the hour before each alert's `created_at`; past it `skipped: "rate"`.
    texts_per_hour: int = 20
    voice_calls_per_hour: int = 5
    # Messages in flight per channel: overall, and per account.
    channel_concurrency: int = 16
    channel_account_concurrency: int = 2
    # The dashboard (docs/dashboard.md): how long a setup link works, how long an unused session lasts,
    # and each edge's sign-in limits, tries per email and failed tries per address.
    setup_link_valid_h: float = 24.0
    session_idle_h: float = 12.0
    sign_in_email_tries: int = 10
    sign_in_email_window_min: float = 10.0
    sign_in_address_tries: int = 10
    sign_in_address_window_min: float = 10.0
    # Argon2id verifies in flight at once on an edge (at most one per address), in threads at the lowest CPU
    # priority; a sign-in that finds none free is answered 429 at once, never queued. Emails and addresses
    # each of its sign-in limits tracks at most (past it the least recently seen is forgotten).
    sign_in_verify_slots: int = 2
    sign_in_tracked_max: int = 50_000
    # Proxies (addresses or networks, comma-separated) whose X-Forwarded-For names the client a sign-in is
    # counted against; empty: the peer's address, so behind a proxy everyone would share the proxy's.
    trusted_proxies: str = ""
    # Fault injection for the kill tests (processors/faults.py): "every=N,limit=M"; empty in production.
    faults: str = ""
    # The deployment key that seals webhook signing secrets on the accounts topic (infra/sealing.py):
    # Fernet keys, comma-separated, the first sealing; else the file's, one a line (default
    # <data_dir>/secret.key, which `callscreen run` makes). Only the processes that seal or open a secret
    # get it (README, Secrets at rest); never in a repr, so never in a log line.
    secret_key: str = field(default="", repr=False)
    secret_key_file: str = ""
    rules: Rules = field(default_factory=Rules)

    @property
    def memory_broker(self) -> bool:
        """True on the in-memory development broker, whose faults the clients work around."""
        return self.broker.startswith(MEMORY_SCHEME)

    @property
    def channels_available(self) -> frozenset[str]:
        """The alert channels this deployment can send on: email with an SMTP server and a sender address,
        text and voice with the carrier's credentials and a sender number."""
        found = set()
        if self.smtp_url.startswith(("smtp://", "smtps://")) and self.email_from:
            found.add("email")
        if self.twilio_account_sid and self.twilio_auth_token and self.twilio_from:
            found |= {"text", "voice"}
        return frozenset(found)

    @property
    def dashboard_url(self) -> str:
        """Where people open the dashboard: the public URL, else the edge's own address."""
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def setup_link_valid_ms(self) -> int:
        return round(self.setup_link_valid_h * HOUR_MS)

    @property
    def session_idle_ms(self) -> int:
        return round(self.session_idle_h * HOUR_MS)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    def with_overrides(self, **values: Any) -> Settings:
        """A copy with the given fields replaced (command-line flags win over everything)."""
        clean = {k: v for k, v in values.items() if v is not None}
        return dataclasses.replace(self, **clean)


def scalar_names() -> dict[str, tuple[str | None, dataclasses.Field[Any]]]:
    """Every scalar setting by its flat name: the concern it belongs to (None for Settings) and its field."""
    names: dict[str, tuple[str | None, dataclasses.Field[Any]]] = {
        f.name: (None, f) for f in fields(Settings) if f.name != "rules"
    }
    for concern, (prefix, kind) in CONCERNS.items():
        for f in fields(kind):
            names[prefix + f.name] = (concern, f)
    return names


def to_env(settings: Settings) -> dict[str, str]:
    """The scalar settings as environment variables, for the processes `run` starts (they read the
    same TOML files for the tables)."""
    env = {}
    for name, (concern, f) in scalar_names().items():
        owner = settings if concern is None else getattr(settings.rules, concern)
        value = getattr(owner, f.name)
        if isinstance(value, Mapping):
            continue
        if isinstance(value, frozenset):
            env[f"CALLSCREEN_{name.upper()}"] = ",".join(sorted(value))
            continue
        env[f"CALLSCREEN_{name.upper()}"] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return env


def _coerce(kind: Any, raw: Any) -> Any:
    if kind in (bool, "bool"):
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() in {"1", "true", "yes", "on"}
    if kind in (int, "int"):
        return int(raw)
    if kind in (float, "float"):
        return float(raw)
    if kind in (str, "str"):
        return str(raw)
    if kind in (frozenset[str], "frozenset[str]"):
        # A list in TOML, comma-separated in the environment.
        items = raw if isinstance(raw, list) else str(raw).split(",")
        return frozenset(str(item).strip() for item in items if str(item).strip())
    return raw


def _flatten(data: dict[str, Any]) -> dict[str, Any]:
    """TOML tables per concern (`[live]`, `[scoring.weights]`) as flat names (`live_silent_s`, `scoring_weights`)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in CONCERNS and isinstance(value, dict):
            prefix = CONCERNS[key][0]
            flat.update({prefix + name: inner for name, inner in value.items()})
        else:
            flat[key] = value
    return flat


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the defaults, the TOML files, then the environment on top."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    config = env.get("CALLSCREEN_CONFIG") or ("callscreen.toml" if Path("callscreen.toml").exists() else "")
    if config:
        values.update(_flatten(tomllib.loads(Path(config).read_text())))
    policy = env.get("CALLSCREEN_POLICY_FILE") or values.get("policy_file")
    if policy:
        values.update(_flatten(tomllib.loads(Path(str(policy)).read_text())))
    known = scalar_names()
    for name in known:
        raw = env.get(f"CALLSCREEN_{name.upper()}")
        if raw is not None:
            values[name] = raw
    base: dict[str, Any] = {}
    concerns: dict[str, dict[str, Any]] = {name: {} for name in CONCERNS}
    for name, value in values.items():
        if name not in known:
            continue
        concern, f = known[name]
        target = base if concern is None else concerns[concern]
        if isinstance(value, dict):
            defaults = getattr(CONCERNS[concern][1](), f.name) if concern is not None else {}
            target[f.name] = MappingProxyType({**defaults, **value})
        else:
            target[f.name] = _coerce(f.type, value)
    rules = Rules(**{name: CONCERNS[name][1](**given) for name, given in concerns.items()})
    return Settings(**base, rules=rules)
