"""The deployment files agree with the code: roles, topics, scrape targets, dashboard metrics, locks and image.

`docker compose -f docker-compose.kafka.yml config` is the full check where a Docker client with the
compose plugin is installed; this one needs only the files.
"""

from __future__ import annotations

import re
import tomllib
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from alerting.metrics import AlertingMetrics
from infra.settings import Settings
from infra.topics import topic_specs
from ingest.metrics import EdgeMetrics
from processors.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.kafka.yml").read_text())
    return loaded


def project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def lock_pins(name: str) -> dict[str, str]:
    """A lock file's pins, name to version; each must carry a hash, or `pip --require-hashes` refuses it."""
    text = (ROOT / "deploy" / name).read_text().replace("\\\n", " ")
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pinned, _, rest = line.partition("==")
        assert "--hash=sha256:" in rest, f"{name}: {pinned} has no hash"
        pins[canonicalize_name(pinned)] = rest.split()[0]
    return pins


def roles_env() -> dict[str, str]:
    lines = (ROOT / "deploy" / "roles.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_compose_runs_every_role_against_kafka_in_kraft_mode() -> None:
    services = compose()["services"]
    commands = {name: s.get("command") for name, s in services.items()}
    assert commands["worker-1"] == commands["worker-2"] == ["run", "--role", "worker"]
    assert commands["edge"] == ["run", "--role", "edge"]
    assert commands["alerting"] == ["run", "--role", "alerting"]
    # Static, as `callscreen run` makes its own alerting child: a crash is not waited out for a session.
    assert services["alerting"]["environment"]["CALLSCREEN_ALERTING_INSTANCE"] == "alerting"
    assert "process.roles=broker,controller" in (ROOT / "deploy" / "kafka" / "server.properties").read_text()
    assert {"topics", "prometheus"} <= set(services)
    assert roles_env()["CALLSCREEN_BROKER"] == "kafka://kafka:9092"
    for name in ("worker-1", "worker-2", "edge", "alerting", "operator"):
        assert services[name]["env_file"][0] == "deploy/roles.env"
        assert services[name]["depends_on"]["topics"]["condition"] == "service_completed_successfully"


def principal(path: str) -> str:
    lines = (ROOT / path).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))[
        "CALLSCREEN_KAFKA_SASL_USERNAME"
    ]


def granted(user: str) -> list[tuple[str, set[str]]]:
    """(operation, topics) of each `allow USER` line of deploy/kafka-acls.sh; a prefixed topic ends in `*`."""
    script = (ROOT / "deploy" / "kafka-acls.sh").read_text().replace("\\\n", " ")
    found = []
    for line in script.splitlines():
        words = line.replace('"', "").replace("$p", "callscreen").split()
        if words[:2] != ["allow", user]:
            continue
        star = "*" if "prefixed" in words else ""
        pairs = list(pairwise(words))
        topics = {value + star for flag, value in pairs if flag == "--topic"}
        found += [(value, topics) for flag, value in pairs if flag == "--operation"]
    return found


def topics_for(user: str, operation: str) -> set[str]:
    return {t for op, topics in granted(user) if op == operation for t in topics}


def test_every_role_logs_in_as_its_own_principal_on_sasl_only() -> None:
    services = compose()["services"]
    users = {name: principal(services[name]["env_file"][1]) for name in ("worker-1", "edge", "alerting", "operator")}
    assert users == {"worker-1": "worker", "edge": "edge", "alerting": "alerting", "operator": "operator"}
    assert principal(services["topics"]["env_file"]) == "admin"
    assert roles_env()["CALLSCREEN_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
    assert roles_env()["CALLSCREEN_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    lines = (ROOT / "deploy" / "kafka" / "server.properties").read_text().splitlines()
    broker = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert broker["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    # The only listener off the container's loopback is the SASL one.
    listeners = broker["listeners"].split(",")
    assert [name for name in listeners if "127.0.0.1" not in name] == ["SASL://:9092"]
    assert "SASL:SASL_PLAINTEXT" in broker["listener.security.protocol.map"]


def test_the_edge_writes_only_event_topics_and_analysts_read_only_alerts() -> None:
    assert topics_for("edge", "Write") == {
        "callscreen.events",
        "callscreen.queries",
        "callscreen.accounts",
        "callscreen.status",
        "callscreen.shadow",
    }
    assert topics_for("edge", "Read") == {
        "callscreen.accounts",
        "callscreen.replies",
        "callscreen.status",
        "callscreen.shadow",
    }
    assert topics_for("shadow", "Write") == {"callscreen.shadow"}
    assert topics_for("analyst", "Read") == {"callscreen.alerts"}
    assert topics_for("analyst", "Describe") == {"callscreen.alerts"}
    assert {op for op, _ in granted("analyst")} == {"Read", "Describe"}
    script = (ROOT / "deploy" / "kafka-acls.sh").read_text()
    assert "analyst" not in next(line for line in script.splitlines() if line.startswith("for user in"))
    assert "callscreen.accounts" not in topics_for("worker", "Write") | topics_for("alerting", "Write")


def test_topic_script_creates_every_topic_the_service_needs() -> None:
    script = (ROOT / "deploy" / "create-topics.sh").read_text()
    named = set(re.findall(r"callscreen\.(\w+)", script))
    loops = [line.removeprefix("for name in ").split(";")[0] for line in script.splitlines() if "for name in" in line]
    named |= {name for loop in loops for name in loop.split()}
    needed = {spec.name.removeprefix("callscreen.") for spec in topic_specs(Settings())}
    assert needed <= named
    partitions = compose()["services"]["topics"]["environment"]["PARTITIONS"]
    assert partitions == roles_env()["CALLSCREEN_PARTITIONS"]


def test_prometheus_scrapes_every_process() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    port = roles_env()["CALLSCREEN_METRICS_PORT"]
    assert targets == {"edge:8080", f"worker-1:{port}", f"worker-2:{port}", f"alerting:{port}"}


def test_dashboard_queries_only_metrics_the_code_exports() -> None:
    exported: set[str] = set()
    for registry in (EdgeMetrics().registry, WorkerMetrics().registry, AlertingMetrics().registry):
        for family in registry.collect():
            exported |= {family.name, f"{family.name}_total", f"{family.name}_bucket", f"{family.name}_count"}
    dashboard = orjson.loads((ROOT / "deploy" / "grafana-dashboard.json").read_bytes())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bcallscreen_\w+", target["expr"])
    }
    assert used, "the dashboard has no queries"
    assert used <= exported, used - exported


def test_locks_pin_every_dependency_with_hashes_and_the_image_runs_the_tested_versions() -> None:
    declared = project()["project"]
    runtime, dev = lock_pins("requirements.lock"), lock_pins("requirements-dev.lock")
    needed = {canonicalize_name(Requirement(r).name) for r in declared["dependencies"]}
    tools = {canonicalize_name(Requirement(r).name) for r in declared["optional-dependencies"]["dev"]}
    assert needed <= set(runtime), needed - set(runtime)
    assert needed | tools <= set(dev), (needed | tools) - set(dev)
    assert {name: dev.get(name) for name in runtime} == runtime


def test_image_installs_the_hash_checked_lock_and_every_package() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "pip install --require-hashes -r deploy/requirements.lock" in dockerfile
    copied = set(re.findall(r"^COPY (\w+) \1$", dockerfile, re.MULTILINE))
    packages = {name.rstrip("*") for name in project()["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, packages - copied


def test_every_image_the_deployment_pulls_is_pinned_by_digest() -> None:
    """A tag can be moved to other layers; a digest cannot."""
    digest = re.compile(r"^\S+:\S+@sha256:[0-9a-f]{64}$")
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    bases = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert len(bases) == 2 and all(digest.match(base) for base in bases), bases
    pulled = [s["image"] for s in compose()["services"].values() if "build" not in s]
    assert pulled and all(digest.match(image) for image in pulled), pulled
