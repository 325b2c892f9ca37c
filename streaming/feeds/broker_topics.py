"""The watched cluster's topics as the KIP-848 cluster feed needs them: name -> (topic id, partition count).

Kafka 4.1+ writes no ``ConsumerGroupPartitionMetadata``, so the feed learns the topics a consumer group subscribes to
from the cluster itself (a Metadata request, as a consumer would). ``BrokerTopics`` keeps the last answer and asks
again when it is older than ``max_age_s`` -- a topic created or grown since shows within that time -- or when the
feed could not explain a batch with what it had and the answer is older than the batch (``refresh``). Each request
asks for every topic: one request answers every group, and a topic name seen for the first time is answered with
the others.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Callable


def kafka_topic_id(text: str) -> str:
    """A topic id as Kafka prints it (URL-safe base64 of its 16 bytes), from kafka-python's hyphenated UUID."""
    return base64.urlsafe_b64encode(uuid.UUID(text).bytes).decode("ascii").rstrip("=")


class BrokerTopics:
    """Callable: a topic name -> (topic id, partitions), or None when the cluster has no such topic."""

    def __init__(
        self, describe: Callable[[], list[dict]], max_age_s: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        # describe(): every topic, as kafka-python's KafkaAdminClient.describe_topics() gives them
        self.describe, self.max_age_s, self.clock = describe, max_age_s, clock
        self.topics: dict[str, tuple[str, int]] = {}
        self.fetched_at: float | None = None  # wall clock (s), to compare with the brokers' record times
        self.requests = self.failures = 0

    @classmethod
    def of_cluster(cls, bootstrap: str, client: dict | None = None, **kwargs) -> "BrokerTopics":
        from kafka import KafkaAdminClient

        from streaming.kafka_client.kafka_conf import for_client

        admin = KafkaAdminClient(
            **for_client(
                KafkaAdminClient, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-cluster-feed"
            )
        )
        topics = cls(admin.describe_topics, **kwargs)
        topics.close = admin.close
        return topics

    def close(self) -> None:
        pass

    def __call__(self, name: str) -> tuple[str, int] | None:
        if self.fetched_at is None or self.clock() - self.fetched_at >= self.max_age_s:
            self.refresh()
        return self.topics.get(name)

    def refresh(self, since_ms: int | None = None) -> bool:
        """Ask the cluster again; whether any topic is new or changed. ``since_ms``: only if the last answer is
        older than that (a batch's time: an answer given after the broker wrote it already knew what it saw;
        reading an old log, nothing is asked again)."""
        if since_ms is not None and self.fetched_at is not None and self.fetched_at * 1000 >= since_ms:
            return False
        from kafka.errors import KafkaError

        self.fetched_at = self.clock()
        self.requests += 1
        try:
            described = self.describe()
        except KafkaError:
            self.failures += 1  # keep what we had: the feed goes on, a batch it cannot explain is counted
            return False
        now = {
            t["name"]: (kafka_topic_id(t["topic_id"]), len(t["partitions"]))
            for t in described
            if not t.get("error_code") and t.get("topic_id") and t["partitions"]
        }
        changed = any(self.topics.get(name) != found for name, found in now.items())
        self.topics = now
        return changed
