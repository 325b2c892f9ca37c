"""The KIP-848 feed's topics from the cluster (Kafka 4.1+ writes no ConsumerGroupPartitionMetadata): a topic created
after the feed last asked, that a member then subscribes to, is asked for again and explained, even when the answer
is ahead of the batch (another topic grown since) -- both found by the cluster-feed command's test on Kafka 4.4
(tests/cli/test_kip848_cluster_feed.py), each about one run in three. The "broker" here is our consumer model (with
Kafka 4.3+'s initial epoch, its partition metadata records left out as 4.1+ does); the cluster's metadata answers
are what kafka-python's describe_topics gives, in time."""

from __future__ import annotations

import uuid

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.feeds.broker_topics import BrokerTopics, kafka_topic_id
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed, is_consumer_group_record

G, T0 = "g", 1_800_000_000_000
IDS = {"a": str(uuid.UUID(int=1)), "b": str(uuid.UUID(int=2))}
CONFIG = ConsumerGroupConfig.from_properties({**CONSUMER_OBSERVER_SETTINGS, "initial.group.epoch": 1})


def broker_log() -> list[dict]:
    """m joins subscribed to a (3 partitions) at T0; b (2) is created at T0+1 s; m subscribes to a and b at T0+2 s."""
    broker = ConsumerGroupCoordinator(CONFIG)
    records = []

    def send(**event):
        parsed, error = parse_event({"group_id": G, **event})
        assert error is None, error
        records.extend(
            o
            for o in broker.handle(parsed)
            if is_consumer_group_record(o) and o["type"] != "consumer_group_partition_metadata"
        )

    send(type="topic_metadata", topic="a", partitions=3, topic_id=IDS["a"], ts=T0)
    send(
        type="consumer_heartbeat",
        member_id="m",
        member_epoch=0,
        subscribed_topic_names=["a"],
        topic_partitions=[],
        rebalance_timeout_ms=30_000,
        ts=T0,
    )
    send(type="topic_metadata", topic="b", partitions=2, topic_id=IDS["b"], ts=T0 + 1_000)
    owned = [{"topic_id": kafka_topic_id(IDS["a"]), "partitions": [0, 1, 2]}]
    send(
        type="consumer_heartbeat",
        member_id="m",
        member_epoch=2,
        subscribed_topic_names=["a", "b"],
        topic_partitions=owned,
        ts=T0 + 2_000,
    )
    return records


def test_a_topic_created_since_the_last_answer_is_asked_for_again():
    records = broker_log()
    now = [T0 / 1000]
    described = []

    def describe():  # the cluster: b exists from T0+1 s; a grows to 5 then too (the broker reacts later)
        described.append(now[0])
        later = now[0] >= T0 / 1000 + 1
        sizes = {"a": 5, "b": 2} if later else {"a": 3}
        return [
            {"name": n, "topic_id": IDS[n], "error_code": 0, "partitions": [{}] * size} for n, size in sizes.items()
        ]

    # max_age long: only a batch the cached answer cannot explain asks again
    topics = BrokerTopics(describe, max_age_s=60, clock=lambda: now[0])
    feed = ConsumerGroupFeed(CONFIG, topics=topics)
    events = []
    for i, r in enumerate(records):
        now[0] = r["ts"] / 1000 + 0.05  # read 50 ms after the broker wrote it
        events += feed.events_for({k: v for k, v in r.items() if k != "ts"}, r["ts"])
        if i + 1 == len(records) or records[i + 1]["ts"] != r["ts"]:
            events += feed.flush()  # a following reader has caught up: the batch is whole
    assert feed.counts["unexplained records"] == 0
    assert [(e["type"], e.get("topic")) for e in events] == [
        ("topic_metadata", "a"),
        ("consumer_heartbeat", None),
        ("topic_metadata", "b"),
        ("consumer_heartbeat", None),
    ]
    assert len(described) == 2  # once at the start, once for the batch that subscribed to b


def test_an_old_log_is_not_asked_for_again():
    """Reading batches written before the last answer, asking again cannot help: nothing is asked."""
    now = [T0 / 1000 + 100]
    described = []

    def describe():
        described.append(now[0])
        return []

    topics = BrokerTopics(describe, max_age_s=60, clock=lambda: now[0])
    assert topics("a") is None and not topics.refresh(since_ms=T0) and len(described) == 1
    assert topics.refresh(since_ms=T0 + 200_000) is False and len(described) == 2  # asked: newer batch, no change
