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
