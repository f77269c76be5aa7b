"""One typed settings object, read from the environment and an optional TOML file.

Every default is the one `decisions.md` settles. Environment variables are the upper-case
field name prefixed with `CALLSCREEN_`; the TOML file (`CALLSCREEN_CONFIG`, or
`callscreen.toml` in the working directory) uses the field names as keys. The environment wins.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

# `--broker memory`: the in-memory development broker, which `run` then names with this scheme so every
# client knows to apply its workarounds (callscreen/kafka.py).
MEMORY_BROKER = "memory"
MEMORY_SCHEME = "tansu://"


@dataclass(frozen=True)
class Settings:
    # Process and broker.
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: str = "./data"
    # "" starts the local Apache Kafka under data_dir; "memory" the in-memory development broker;
    # "kafka://host:port[,host:port]" names a cluster (decisions.md section 15).
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
    partitions: int = 4
    reply_partitions: int = 8
    # Answers go straight back to the asking edge over TCP (the replies topic is the fallback). The edge
    # listens on `host`, an ephemeral port, and tells workers `reply_host` (default: `host`, or this
    # machine's name when `host` is a wildcard).
    direct_replies: bool = True
    reply_host: str = ""
    topic_prefix: str = "callscreen"
    app_id: str = "callscreen-worker"
    log_level: str = "INFO"
    workers: int = 1
    worker_index: int = 0
    role: str = "all"
    # Prometheus port of a worker or alerting process (0: none). Under `callscreen run` worker N takes
    # metrics_port + N and the alerting role metrics_port + workers; the edge serves /metrics on `port`.
    metrics_port: int = 0
    # Answer path.
    answer_deadline_s: float = 2.0
    # The longest a broker holds a fetch that finds nothing new; one that finds a record returns at once.
    fetch_max_wait_ms: int = 500
    # A worker sends its tables' changed keys to their changelogs this often, each key's last value once.
    changelog_flush_ms: int = 200
    # One block cache for all of a worker's RocksDB databases; their memtables are charged to it.
    rocksdb_memory_mb: int = 32
    max_body_bytes: int = 65536
    max_future_at_s: int = 300
    # Rate limits (decisions.md section 5).
    reads_per_minute: int = 600
    events_per_minute: int = 1200
    # Plans (decisions.md section 4).
    watch_numbers: int = 3
    watch_daily_starts: int = 1000
    guard_numbers: int = 25
    guard_daily_starts: int = 25000
    # Scoring (decisions.md section 7).
    review_threshold: float = 0.5
    reject_threshold: float = 0.8
    policy_file: str = ""
    # Live monitor thresholds (decisions.md section 8).
    live_recording_s: float = 45.0
    live_recording_words: int = 120
    live_monologue_turns: int = 3
    live_monologue_s: float = 20.0
    live_monologue_words: int = 60
    live_barge_count: int = 6
    live_barge_window_s: float = 60.0
    live_rapid_count: int = 8
    live_rapid_window_s: float = 10.0
    live_repeat_count: int = 3
    live_silent_s: float = 60.0
    live_one_sided_words: int = 200
    live_one_sided_ratio: float = 0.10
    max_call_turns: int = 3000
    silent_sweep_s: float = 1.0
    # Detector rules (decisions.md section 9).
    detect_rate_calls: int = 5
    detect_rate_window_min: int = 10
    detect_rotating_callers: int = 4
    detect_rotating_window_min: int = 10
    detect_rotating_digits: int = 2
    detect_prefix_callers: int = 10
    detect_prefix_digits: int = 8
    detect_prefix_share: float = 0.5
    detect_prefix_window_min: int = 30
    detect_country_calls: int = 10
    detect_country_window_min: int = 15
    detect_country_quiet_days: int = 7
    detect_geo_callers: int = 5
    detect_geo_window_min: int = 30
    detect_volume_ceiling: int = 120
    detect_spike_factor: float = 3.0
    detect_spike_min_calls: int = 20
    detect_spike_floor: float = 5.0
    detect_normal_factor: float = 1.5
    detect_baseline_days: int = 7
    detect_spend_ceiling: float = 25.0
    detect_block_min: int = 60
    detect_cooldown_min: int = 15
    detect_long_call_min: int = 30
    # Webhooks (decisions.md section 10).
    webhook_timeout_s: float = 8.0
    webhook_ca_file: str = ""
    webhook_allow_private: bool = False
    webhook_concurrency: int = 32

    @property
    def memory_broker(self) -> bool:
        """True on the in-memory development broker, whose faults the clients work around."""
        return self.broker.startswith(MEMORY_SCHEME)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}.{name}"

    def with_overrides(self, **values: Any) -> Settings:
        """A copy with the given fields replaced (command-line flags win over everything)."""
        clean = {k: v for k, v in values.items() if v is not None}
        return dataclasses.replace(self, **clean)


def to_env(settings: Settings) -> dict[str, str]:
    """The settings as environment variables, for the processes `run` starts."""
    env = {}
    for f in fields(Settings):
        value = getattr(settings, f.name)
        env[f"CALLSCREEN_{f.name.upper()}"] = ("1" if value else "0") if isinstance(value, bool) else str(value)
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
    return raw


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Settings from the optional TOML file, then the environment on top."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    config = env.get("CALLSCREEN_CONFIG") or ("callscreen.toml" if Path("callscreen.toml").exists() else "")
    if config:
        with open(config, "rb") as handle:
            values.update(tomllib.load(handle))
    known = {f.name: f for f in fields(Settings)}
    for name in known:
        raw = env.get(f"CALLSCREEN_{name.upper()}")
        if raw is not None:
            values[name] = raw
    typed = {name: _coerce(known[name].type, value) for name, value in values.items() if name in known}
    return Settings(**typed)
