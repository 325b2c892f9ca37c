"""Topic sizes from the broker reach the groups: the watcher publishes them, the sink fans global metadata out to
every known group, and the coordinator rebalances a group whose subscribed topic changed."""

from __future__ import annotations

import json

import pytest
from kafka import KafkaConsumer, TopicPartition

from streaming.feeds.metadata_watch import TopicMetadataWatcher
from streaming.kafka_client.topics import ensure_topics
from streaming.spark.sinks import TrackerSink

pytestmark = pytest.mark.kafka


def read(bootstrap, topic):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2_000)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    records = [(r.key, json.loads(r.value)) for r in consumer]
    consumer.close()
    return records


def test_watcher_publishes_new_and_changed_sizes_once(kafka_bootstrap, topic_name):
    data, events = f"{topic_name}-data", f"{topic_name}-events"
    ensure_topics(kafka_bootstrap, {data: 3, events: 1})
    watcher = TopicMetadataWatcher(kafka_bootstrap, events)
    try:
        assert watcher.poll_once() == {}  # nothing watched yet
        watcher.observe(
            [
                {
                    "type": "rebalance",
                    "group_id": "g",
                    "assignment": {"m": []},
                    "unknown_topics": [data, f"{topic_name}-missing"],
                }
            ]
        )
        assert watcher.poll_once() == {data: 3}  # a topic that does not exist is not published
        assert watcher.poll_once() == {}  # unchanged: published once
    finally:
        watcher.stop()
    ((key, event),) = read(kafka_bootstrap, events)
    assert key == b"" and event["type"] == "topic_metadata" and event["topic"] == data and event["partitions"] == 3
    assert "group_id" not in event  # global: the job hands it to every group


def test_in_event_time_sizes_are_stamped_with_the_feeds_time(kafka_bootstrap, topic_name):
    """A feed replayed from the past: a wall-clock stamp would move each group's clock to now and expire its
    members, so the watcher stamps what it publishes with the latest time the outputs showed."""
    data, events = f"{topic_name}-data", f"{topic_name}-events"
    ensure_topics(kafka_bootstrap, {data: 2, events: 1})
    watcher = TopicMetadataWatcher(kafka_bootstrap, events, event_time=True)
    try:
        rebalance = {"type": "rebalance", "group_id": "g", "assignment": {"m": [[data, 0]]}, "unknown_topics": []}
        watcher.observe([{**rebalance, "ts": 1_000_000}, {"type": "state_change", "group_id": "g", "ts": 999_000}])
        assert watcher.poll_once() == {data: 2}
    finally:
        watcher.stop()
    ((_, event),) = read(kafka_bootstrap, events)
    assert event["ts"] == 1_000_000  # the latest output's time, not the clock's


def test_topics_of_groups_rebuilt_from_the_store_are_looked_up_at_once(kafka_bootstrap, topic_name):
    """A restored classic group's topic sizes are the partitions its stored assignment names; the topic may have
    grown while the checkpoint was being lost."""
    data, events = f"{topic_name}-data", f"{topic_name}-events"
    ensure_topics(kafka_bootstrap, {data: 3, events: 1})
    watcher = TopicMetadataWatcher(kafka_bootstrap, events)
    try:
        watcher.observe([{"type": "group_restored", "group_id": "g", "generation": 4, "topics": {data: 2}}])
        assert watcher._wake.is_set()  # not at the next refresh: now
        assert watcher.poll_once() == {data: 3}
    finally:
        watcher.stop()


def test_sink_fans_global_metadata_out_to_each_known_group(kafka_bootstrap, topic_name, tmp_path):
    events = f"{topic_name}-events"
    ensure_topics(kafka_bootstrap, {events: 2})
    sink = TrackerSink(
        bootstrap=kafka_bootstrap, events_topic=events, outputs_topic=None, checkpoint=str(tmp_path / "cp")
    )
    try:
        sink.handle(
            [
                {"type": "state_change", "group_id": "a", "ts": 1, "to": "Stable"},
                {"type": "state_change", "group_id": "b", "ts": 1, "to": "Stable"},
                {
                    "type": "broadcast_event",
                    "group_id": "",
                    "ts": 2,
                    "event": {"type": "topic_metadata", "topic": "t", "partitions": 5, "ts": 2},
                },
            ],
            batch_id=0,
        )
        sink.handle(
            [
                {
                    "type": "broadcast_event",
                    "group_id": "",
                    "ts": 2,
                    "event": {"type": "topic_metadata", "topic": "t", "partitions": 5, "ts": 2},
                }
            ],
            batch_id=0,
        )
    finally:
        sink.close()
    fanned = sorted((key.decode(), e["group_id"], e["partitions"]) for key, e in read(kafka_bootstrap, events))
    assert fanned == [("a", "a", 5), ("b", "b", 5)]  # once per group; the replayed batch 0 sent nothing
