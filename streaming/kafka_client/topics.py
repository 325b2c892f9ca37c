"""Creating the topics a command needs, on brokers that can and with a clear way out on those that cannot."""

from __future__ import annotations

import contextlib

from streaming.kafka_client import kafka_conf


class TopicsMissing(RuntimeError):
    """Topics a command needs are not there, and this broker cannot create them over the protocol."""


def ensure_topics(
    bootstrap: str, topics: dict[str, int], client: dict | None = None, can_create: bool | None = None
) -> None:
    """Create missing topics (name -> partitions); existing ones are left as they are. ``client``: kafka-python
    settings; ``can_create``: whether the broker has CreateTopics (None: try). Raises ``TopicsMissing`` when they are
    missing and cannot be created, naming them and the tool to create them with."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic
    from kafka.errors import IncompatibleBrokerVersion, TopicAlreadyExistsError, UnrecognizedBrokerVersion

    # Metadata answers on every broker version; the admin client is needed only to create.
    consumer = KafkaConsumer(
        **kafka_conf.for_client(KafkaConsumer, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-admin")
    )
    try:
        existing = consumer.topics()
    finally:
        consumer.close()
    new = [NewTopic(name, n, 1) for name, n in topics.items() if name and name not in existing]
    if not new:
        return
    if can_create is False:
        raise _topics_missing(bootstrap, new)
    admin = KafkaAdminClient(
        **kafka_conf.for_client(
            KafkaAdminClient, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-admin"
        )
    )
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics(new)
    except (IncompatibleBrokerVersion, UnrecognizedBrokerVersion):
        raise _topics_missing(bootstrap, new) from None
    finally:
        admin.close()


def _topics_missing(bootstrap: str, new: list) -> TopicsMissing:
    named = ", ".join(f"{t.name} ({t.num_partitions} partition{'s' if t.num_partitions != 1 else ''})" for t in new)
    return TopicsMissing(
        f"the broker at {bootstrap} cannot create topics over the protocol (CreateTopics came with Kafka 0.10.1): "
        f"create {named} with Kafka's own tool first, e.g. kafka-topics.sh --zookeeper ZOOKEEPER --create "
        f"--topic {new[0].name} --partitions {new[0].num_partitions} --replication-factor 1"
    )
