"""Kafka client factories, topic set-up and checks: the one place that knows how to reach the broker.

Every client gets the deployment's TLS and SASL settings (README, The broker). The in-memory
development broker (`--broker memory`) has faults of its own (docs/architecture.md, "The
in-memory broker"); its workarounds are applied here, only when `settings.memory_broker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaError, NoError, TopicAlreadyExistsError, for_code
from aiokafka.helpers import create_ssl_context
from murmurhash2 import murmurhash2

from infra.settings import Settings
from infra.topics import TopicSpec, topic_specs

log = logging.getLogger(__name__)
# Tansu reports wrong end offsets for multi-record batches: with a batch this small every batch holds
# exactly one record. Its empty fetches are also cheap to repeat, so its consumers poll often.
MEMORY_BATCH_BYTES = 64
# The producer's batch limit on Kafka (aiokafka's default is 16 KiB). A producer has one request in flight
# to a broker, holding at most one batch a partition, and a partition's next batch waits for the one before
# it to leave: a changelog flush of a megabyte went out in some sixty round trips, one after the other.
# Half of the broker's default `message.max.bytes` (1 MiB) leaves room for a batch's overhead.
BATCH_BYTES = 512 * 1024
MEMORY_FETCH_WAIT_MS = 5
MEMORY_FOLLOW_WAIT_MS = 50
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class TopicProblem(RuntimeError):
    """An existing topic the service cannot run on; the message says what to change."""


class BrokerUnreachable(RuntimeError):
    """No bootstrap server took a connection (with its login, under SASL); the message says why."""


def bootstrap(settings: Settings) -> str:
    """The host:port list aiokafka wants, from `kafka://host:port[,host:port]`."""
    url = settings.broker
    return url.split("://", 1)[1] if "://" in url else url


# The seed of Kafka's default partitioner (the Java client's `Utils.murmur2`).
MURMUR2_SEED = 0x9747B28C


def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2), so explicit and keyed sends agree.

    `murmurhash2` computes it in C: aiokafka's pure-Python `murmur2` took 3.9 µs a key, and the worker
    hashes each fact's number key, more numbers than a cache held
    (docs/decisions/0018-partitions-by-murmur2-in-c.md).
    """
    return (murmurhash2(key.encode(), MURMUR2_SEED) & 0x7FFFFFFF) % partitions


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    if not settings.kafka_security_protocol.endswith("SSL"):
        return None
    context: ssl.SSLContext = create_ssl_context(cafile=settings.kafka_ca_file or None)
    return context


def auth(settings: Settings) -> dict[str, Any]:
    """aiokafka's security arguments for the deployment's protocol and SASL mechanism."""
    protocol = settings.kafka_security_protocol.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"CALLSCREEN_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(SECURITY_PROTOCOLS)}")
    found: dict[str, Any] = {"security_protocol": protocol}
    context = tls_context(settings)
    if context is not None:
        found["ssl_context"] = context
    if protocol.startswith("SASL"):
        mechanism = settings.kafka_sasl_mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"CALLSCREEN_KAFKA_SASL_MECHANISM must be one of {', '.join(SASL_MECHANISMS)}")
        found.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=settings.kafka_sasl_password,
        )
    return found


def fetch_wait_ms(settings: Settings, follower: bool = False, folding: bool = False) -> int:
    """How long the broker may hold an empty fetch (on Kafka it answers as soon as a record lands);
    `folding` is the consumer a worker folds its topics with."""
    if settings.memory_broker:
        return MEMORY_FOLLOW_WAIT_MS if follower else MEMORY_FETCH_WAIT_MS
    return settings.worker_fetch_max_wait_ms if folding else settings.fetch_max_wait_ms


def make_producer(settings: Settings, **extra: Any) -> AIOKafkaProducer:
    """Acknowledged by every in-sync replica; idempotent, so a retried batch is never written twice."""
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap(settings),
        "acks": "all",
        "linger_ms": 0,
        "enable_idempotence": True,
        "max_batch_size": BATCH_BYTES,
        **auth(settings),
    }
    if settings.memory_broker:
        kwargs.update(max_batch_size=MEMORY_BATCH_BYTES, enable_idempotence=False)
    kwargs.update(extra)
    return AIOKafkaProducer(**kwargs)


def make_consumer(settings: Settings, follower: bool = False, **extra: Any) -> AIOKafkaConsumer:
    """A group-less consumer: callers `assign()` partitions themselves (no group joins)."""
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap(settings),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": fetch_wait_ms(settings, follower),
        **auth(settings),
    }
    kwargs.update(extra)
    return AIOKafkaConsumer(**kwargs)


async def partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    """Every partition of `topic`, asking the broker when the consumer's metadata does not know it yet."""
    found = consumer.partitions_for_topic(topic)
    if not found:
        # A group-less consumer's metadata covers only what it was asked about; ask the broker.
        found = (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic)
    if not found:
        raise RuntimeError(f"topic {topic} does not exist")
    return [TopicPartition(topic, p) for p in sorted(found)]


def make_admin(settings: Settings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(bootstrap_servers=bootstrap(settings), **auth(settings))


@dataclass(frozen=True)
class TopicState:
    partitions: int
    configs: dict[str, str]


def topic_configs(spec: TopicSpec, settings: Settings) -> dict[str, str]:
    """What the service relies on: source topics keep every record; working topics forget quickly."""
    configs = {"min.insync.replicas": str(settings.min_insync_replicas)}
    if spec.source:
        configs.update({"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"})
    elif spec.retention_ms is not None:
        configs.update({"retention.ms": str(spec.retention_ms), "segment.ms": str(spec.retention_ms)})
    return configs


def problems(specs: list[TopicSpec], found: dict[str, TopicState]) -> list[str]:
    """Why the existing topics cannot carry the service; empty when they can."""
    wrong = []
    for spec in specs:
        state = found.get(spec.name)
        if state is None:
            continue
        if state.partitions != spec.partitions:
            wrong.append(
                f"topic {spec.name} has {state.partitions} partitions, not {spec.partitions}: set "
                f"CALLSCREEN_PARTITIONS to match, or recreate the topic (a repartition needs `callscreen rebuild`)"
            )
        if not spec.source:
            continue
        retention = state.configs.get("retention.ms", "-1")
        retention_bytes = state.configs.get("retention.bytes", "-1")
        if retention != "-1" or retention_bytes != "-1":
            wrong.append(
                f"topic {spec.name} would expire records (retention.ms={retention}, "
                f"retention.bytes={retention_bytes}); a source topic keeps everything: "
                f"kafka-configs.sh --alter --entity-type topics --entity-name {spec.name} "
                "--add-config retention.ms=-1,retention.bytes=-1"
            )
        if "compact" in state.configs.get("cleanup.policy", "delete"):
            wrong.append(
                f"topic {spec.name} is compacted, which drops all but a key's last record; a source topic "
                f"needs cleanup.policy=delete with retention.ms=-1"
            )
    return wrong


async def describe(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, TopicState]:
    if not names:
        return {}
    partitions = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(names)}
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    found: dict[str, TopicState] = {}
    for response in await admin.describe_configs(resources):
        for resource in response.resources:
            _code, _message, _kind, name, entries = resource[:5]
            configs = {str(entry[0]): str(entry[1]) for entry in entries}
            found[name] = TopicState(partitions.get(name, 0), configs)
    return found


async def check_reachable(settings: Settings, timeout_s: float = 10.0) -> None:
    """Connect (and log in) to a bootstrap server once, so a wrong password is reported as one.

    aiokafka's own clients log a refused login and then report only that they could not bootstrap.
    """
    reasons = []
    for server in bootstrap(settings).split(","):
        host, _, port = server.rpartition(":")
        try:
            conn = await asyncio.wait_for(create_conn(host, int(port), **auth(settings)), timeout_s)
        except (KafkaError, OSError, TimeoutError) as exc:
            reasons.append(f"{server}: {type(exc).__name__} {exc}".strip())
            continue
        conn.close()
        return
    hint = ""
    if settings.kafka_security_protocol.upper().startswith("SASL"):
        hint = (
            "; check CALLSCREEN_KAFKA_SASL_USERNAME, CALLSCREEN_KAFKA_SASL_PASSWORD and CALLSCREEN_KAFKA_SASL_MECHANISM"
        )
    raise BrokerUnreachable(f"cannot reach the broker ({'; '.join(reasons)}){hint}")


async def ensure_topics(settings: Settings, timeout_s: float = 30.0) -> None:
    """Create every topic the service needs and check the ones that exist; TopicProblem if it cannot run."""
    await check_reachable(settings)
    admin = make_admin(settings)
    await asyncio.wait_for(admin.start(), timeout_s)
    try:
        specs = topic_specs(settings)
        existing = set(await admin.list_topics())
        found = await describe(admin, [s.name for s in specs if s.name in existing])
        wrong = problems(specs, found)
        if wrong:
            raise TopicProblem("; ".join(wrong))
        wanted = [
            NewTopic(
                name=spec.name,
                num_partitions=spec.partitions,
                replication_factor=settings.replication_factor,
                topic_configs=topic_configs(spec, settings),
            )
            for spec in specs
            if spec.name not in existing
        ]
        await create_led(admin, wanted, timeout_s)
    finally:
        await admin.close()
    await until_answering(settings, [t.name for t in wanted], timeout_s)


async def until_answering(settings: Settings, names: list[str], timeout_s: float) -> None:
    """Until every partition of the topics `names` answers an offset request.

    A new partition's leader is named (`until_led`) a moment before it answers: the edge's first offset
    requests met `NotLeaderForPartitionError`, which aiokafka's consumer logs at error level each time it
    retries (the service log section of docs/benchmarks.md). `end_offsets` retries without a word. Only
    quieter logs depend on it, so a broker that never answers is left to the roles' own retries."""
    if not names:
        return
    consumer = make_consumer(settings)
    try:
        await asyncio.wait_for(consumer.start(), timeout_s)
        # Every topic in one metadata request: `end_offsets` learns an unknown topic by a retry each, 0.1 s apiece.
        await asyncio.wait_for(consumer._client.set_topics(names), timeout_s)
        tps = [tp for name in names for tp in await partitions(consumer, name)]
        await asyncio.wait_for(consumer.end_offsets(tps), timeout_s)
    except (KafkaError, TimeoutError) as exc:
        log.warning("new topics not answering offset requests yet", extra={"error": type(exc).__name__})
    finally:
        await consumer.stop()


async def until_coordinator(settings: Settings, group: str, timeout_s: float = 30.0) -> None:
    """Until `group`'s coordinator serves the group; call it before a consumer of the group starts.

    A new broker makes its group offsets topic at the first lookup and refuses lookups until the group's
    partition is led; aiokafka's consumer logs each refusal at error level, so the alerting role logged
    `GroupCoordinatorNotAvailableError` at every first start on a new broker. A named coordinator may
    still not serve the group: until it has loaded the partition it answers a join with `NOT_COORDINATOR`,
    and the consumer warns that it marks the coordinator dead. So this waits until describing the group
    succeeds as well. The principal asking must be allowed to describe the group. Only quieter logs depend
    on it: past `timeout_s`, or refused, the consumer is left to ask on its own."""
    admin = make_admin(settings)
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            try:
                await group_served(admin, group)
                return
            except KafkaError as exc:
                if not exc.retriable or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.1)
    except (KafkaError, TimeoutError) as exc:
        log.warning("the group's coordinator does not serve it", extra={"group": group, "error": type(exc).__name__})
    finally:
        await admin.close()


async def group_served(admin: AIOKafkaAdminClient, group: str) -> None:
    """Raises the coordinator's refusal to describe `group` (`NotCoordinatorForGroupError`, ...), if any."""
    node = await admin.find_coordinator(group)
    [described] = await admin.describe_consumer_groups([group], group_coordinator_id=node)
    error = for_code(described.groups[0][0])
    if error is not NoError:
        raise error()


async def ensure_changelogs(settings: Settings, names: list[str], timeout_s: float = 30.0) -> None:
    """Create a worker's missing changelog topics (compacted) before its consumer group first joins.

    Faust declares them itself while the group joins, and a topic the group's metadata does not hold
    yet counts as 0 partitions: the table's first write then fails with PartitionsMismatch.
    """
    admin = make_admin(settings)
    await asyncio.wait_for(admin.start(), timeout_s)
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                name=name,
                num_partitions=settings.partitions,
                replication_factor=settings.replication_factor,
                topic_configs={"cleanup.policy": "compact", "min.insync.replicas": str(settings.min_insync_replicas)},
            )
            for name in names
            if name not in existing
        ]
        await create_led(admin, wanted, timeout_s)
    finally:
        await admin.close()


async def create_led(admin: AIOKafkaAdminClient, wanted: list[NewTopic], timeout_s: float) -> None:
    if not wanted:
        return
    with contextlib.suppress(TopicAlreadyExistsError):
        await admin.create_topics(wanted)
    await until_led(admin, [t.name for t in wanted], timeout_s)


async def until_led(admin: AIOKafkaAdminClient, names: list[str], timeout_s: float) -> None:
    """Creating a topic returns before every partition has a leader; clients need the leaders."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        described = await admin.describe_topics(names)
        if all(
            t["error_code"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
            for t in described
        ):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"topics without a leader after {timeout_s:.0f}s: {', '.join(names)}")
        await asyncio.sleep(0.1)


async def read_all(settings: Settings, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record in every partition of `topic`, from its start to the end as of the call."""
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        parts = await partitions(consumer, topic)
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        records: list[ConsumerRecord[bytes, bytes]] = []
        pending = {tp for tp in parts if ends[tp] > await consumer.position(tp)}
        while pending:
            for tp, messages in (await consumer.getmany(*pending, timeout_ms=500)).items():
                records += messages
                if messages and messages[-1].offset + 1 >= ends[tp]:
                    pending.discard(tp)
        return records
    finally:
        await consumer.stop()
