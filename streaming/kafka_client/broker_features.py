"""What a broker can do for the tracker, asked before anything depends on it.

Each kafka-python client settles on one API version: the one it was given (``--kafka-conf api.version=0.9``), else
the broker's, probed. Two things the tracker uses came late: CreateTopics (Kafka 0.10.1), to create its topics, and
record headers (Kafka 0.11, message format v2), where its outputs carry ``batch_id``/``seq``. A client told
``api.version=0.9`` cannot use either, whatever the broker, so the answer is the client's version, not the broker's.
"""

from __future__ import annotations

from streaming.kafka_client.delivery import broker_reachable
from streaming.kafka_client.kafka_conf import for_client

CREATE_TOPICS = (0, 10, 1)
HEADERS = (0, 11)


class BrokerUnavailable(RuntimeError):
    """No broker answers, or none that kafka-python can agree on a protocol with (the message says which)."""


def api_version(bootstrap: str, client: dict | None = None, timeout_ms: int = 10_000) -> tuple[int, ...]:
    """The API version kafka-python's clients use with this broker and these settings."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(
            **for_client(
                KafkaConsumer,
                client,
                bootstrap_servers=bootstrap,
                bootstrap_timeout_ms=timeout_ms,
                client_id="rebalance-tracker-admin",
            )
        )
    except KafkaError as exc:
        raise BrokerUnavailable(unavailable(bootstrap, client, exc)) from None
    try:
        return tuple(consumer.config["api_version"])
    finally:
        consumer.close()


def unavailable(bootstrap: str, client: dict | None, exc: BaseException) -> str:
    """Why a client could not start with a broker, in one line: nobody answers, or kafka-python could not agree on a
    protocol with what answers (a broker older than 0.10 unless told its version)."""
    if not broker_reachable(bootstrap):
        return f"no broker answers at {bootstrap}"
    hint = "" if (client or {}).get("api_version") else " (a broker older than 0.10 needs --kafka-conf api.version=0.9)"
    return f"the broker at {bootstrap} accepts connections but kafka-python could not start with it: {exc}{hint}"


def can_create_topics(version: tuple[int, ...]) -> bool:
    return version >= CREATE_TOPICS


def has_headers(version: tuple[int, ...]) -> bool:
    return version >= HEADERS


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


# Kafka says its release nowhere on the wire; the first request version a release answers tells it (ApiVersions):
FETCH, API_VERSIONS, DESCRIBE_LOG_DIRS = 1, 18, 35
KAFKA_4_1 = (FETCH, 18)  # Fetch v18 came with 4.1 (the first broker to write no partition metadata)
KAFKA_4_3 = (DESCRIBE_LOG_DIRS, 5)  # DescribeLogDirs v5 with 4.3, its only new request version
KAFKA_4_4 = (API_VERSIONS, 5)  # ApiVersions v5 with 4.4


def api_versions(bootstrap: str, client: dict | None = None) -> list[dict[int, tuple[int, int]]]:
    """Every broker's ApiVersions answer (api key -> (min, max)), asked with kafka-python's admin client."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        **for_client(KafkaAdminClient, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-admin")
    )
    try:
        return [
            dict(admin.get_broker_version_data(b["broker_id"]).api_versions)
            for b in admin.describe_cluster()["brokers"]
        ]
    finally:
        admin.close()


def answers(versions: list[dict[int, tuple[int, int]]], request: tuple[int, int]) -> bool:
    """Whether every broker answers this request version (a cluster half upgraded is the older release)."""
    key, version = request
    return bool(versions) and all(v.get(key, (0, -1))[1] >= version for v in versions)


def consumer_group_traits(versions: list[dict[int, tuple[int, int]]]) -> dict:
    """What the cluster feed needs to know of a cluster's consumer-protocol (KIP-848) coordinator:
    ``initial.group.epoch`` (1 since Kafka 4.3, KAFKA-20268), ``empty.group.assignment.epoch`` (KAFKA-20442, Kafka
    4.4; a 4.3.x patch release may have it too, which its ApiVersions cannot tell), whether it writes
    ConsumerGroupPartitionMetadata (not since 4.1: the feed then asks the cluster for its topics), whether an online
    upgrade keeps the subscribed topics' metadata (``upgrade.with.metadata``, 4.1+: the metadata hash) and
    ``group.consumer.assignment.interval.ms`` as the broker's default has it (1000 since 4.3, KIP-1263; a broker or
    group set otherwise is not seen on the wire)."""
    return {
        "initial_group_epoch": 1 if answers(versions, KAFKA_4_3) else 0,
        "assignment_interval_ms": 1000 if answers(versions, KAFKA_4_3) else 0,
        "empty_group_assignment_epoch": answers(versions, KAFKA_4_4),
        "partition_metadata_records": not answers(versions, KAFKA_4_1),
        "upgrade_with_metadata": answers(versions, KAFKA_4_1),
    }
