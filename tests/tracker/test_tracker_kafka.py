"""The whole tracker through a real broker: events topic -> Kafka source -> job -> outputs topic, dead-letter topic,
offsets store and metrics; stopped and restarted from its checkpoint on the way."""

from __future__ import annotations

import dataclasses
import io
import json
import time
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from streaming.coordinator import CoordinatorConfig, GroupCoordinator
from streaming.feeds.publish import encode_event
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES
from streaming.views.live_view import LiveView
from streaming.spark.restore import POSITION_GROUP
from streaming.kafka_client.topics import ensure_topics
from streaming.tracker import TrackerConfig, start_tracker
from streaming.spark.sinks import STORE_TYPES

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    for key, value in records:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def read_all(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list:
    """Every record of ``topic``, read up to the partitions' log end (no idle wait for more)."""
    from streaming.kafka_client.log_end import log_end_offsets

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        end = log_end_offsets(consumer, partitions)
        consumer.seek_to_beginning(*partitions)
        records: list = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic}: not read to its end {end} within {timeout_s} s"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


FEED_START = 1_700_000_000_000


def recorded_feed() -> list[dict]:
    """group-0 rebalances cooperatively, group-1 eagerly; churn brings crashes, leaves, static restarts."""
    return Simulator(
        SimulationSettings(groups=2, seed=21, churn_interval_ms=8_000, assignors=("cooperative-sticky", "range")),
        start_ms=FEED_START,
    ).run_until(FEED_START + 150_000)


def tracker_config(bootstrap: str, topic_name: str, tmp_path, **overrides) -> TrackerConfig:
    """The end-to-end scenario's job: event time, fast triggers, its own topics, store and checkpoint."""
    settings = dict(
        bootstrap=bootstrap,
        events_topic=topic_name,
        outputs_topic=f"{topic_name}-out",
        dlq_topic=f"{topic_name}.dlq",
        store=f"sqlite:{tmp_path / 'offsets.db'}",
        checkpoint=str(tmp_path / "checkpoint"),
        trigger="200 milliseconds",
        time_mode="event",
        watermark_delay="1 second",
    )
    return TrackerConfig(**(settings | overrides))


def first_half(bootstrap: str, config: TrackerConfig, feed: list[dict]) -> None:
    """The events topic with the feed's first half and one record that is not JSON."""
    ensure_topics(bootstrap, {config.events_topic: 2})
    produce(
        bootstrap, config.events_topic, [encode_event(e) for e in feed[: len(feed) // 2]] + [(b"group-0", b"not json")]
    )


def second_half(bootstrap: str, config: TrackerConfig, feed: list[dict]) -> None:
    produce(bootstrap, config.events_topic, [encode_event(e) for e in feed[len(feed) // 2 :]])


def events_log_end(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    from offsets_store.describe import log_end_offsets

    return log_end_offsets(bootstrap, [(topic, p) for p in range(2)])


def check_tracker_run(bootstrap: str, config: TrackerConfig, feed: list[dict]) -> dict[str, list[dict]]:
    """What a run of the whole feed (any split, any restarts) must have left in the outputs topic, the dead-letter
    topic and the store: the pure model's outputs. Returns the outputs by group."""
    # Outputs topic: exactly the pure model's outputs, in order, once — across the restart.
    got: dict[str, list[dict]] = {}
    for record in read_all(bootstrap, config.outputs_topic):
        o = json.loads(record.value)
        assert record.key.decode() == o["group_id"]
        got.setdefault(o["group_id"], []).append(o)
    coordinator = GroupCoordinator(CoordinatorConfig())
    want: dict[str, list[dict]] = {}
    stored_records = []
    for e in feed:
        for o in coordinator.handle(e):
            if o["type"] in STORE_TYPES:
                stored_records.append(o)  # these go to the store, not to the outputs topic
            elif o["type"] in DEFAULT_OUTPUT_TYPES:
                want.setdefault(o["group_id"], []).append(json.loads(json.dumps(o)))
    for group_id, outputs in want.items():
        assert got[group_id] == outputs[: len(got[group_id])]
        assert len(got[group_id]) >= len(outputs) - 3

    # The moments the issue names all happened, and came out as the pure model says.
    everything = [o for outputs in got.values() for o in outputs]
    kinds = {o["type"] for o in everything}
    assert {"member_expired", "member_left", "member_replaced", "assignment", "rebalance"} <= kinds
    replaced = [o for o in everything if o["type"] == "member_replaced"]
    # A static member restarting while Stable takes its old place: no state change at that moment.
    assert any(
        not any(c["type"] == "state_change" and c["ts"] == r["ts"] for c in got[r["group_id"]]) for r in replaced
    ), "no static member restart without a rebalance"
    cooperative = [o for o in got["group-0"] if o["type"] == "rebalance"]
    assert all(r["rebalance_protocol"] == "cooperative" for r in cooperative)
    assert any(
        r["partitions_moved"] > 0
        and any(
            a["revoked"] for a in got["group-0"] if a["type"] == "assignment" and a["generation"] == r["generation"]
        )
        for r in cooperative
    )

    # Dead-letter topic: the bad record, with its reason and where it came from.
    (dead,) = [json.loads(r.value) for r in read_all(bootstrap, config.dlq_topic)]
    assert "not valid JSON" in dead["reason"] and dead["source"]["topic"] == config.events_topic

    # Offsets store: the compacted view of every offset record that came out.
    from offsets_store import open_store

    expected: dict[tuple, int] = {}
    for o in stored_records:  # every commit in the feed was handled; only timer-driven outputs may lag
        if o["type"] == "offset_commit":
            key = (o["group_id"], o["topic"], o["partition"])
            if o.get("tombstone"):
                expected.pop(key, None)
            else:
                expected[key] = o["offset"]
    store = open_store(config.store)
    try:
        records = store.load_records()
    finally:
        store.close()
    stored = {
        (r["group_id"], r["topic"], r["partition"]): r["offset"]
        for r in records
        if r["type"] == "offset_commit" and not r.get("tombstone")
    }
    # ...besides the tracker's own position on the events topic: all of it was read.
    position = {(t, p): o for (g, t, p), o in stored.items() if g == POSITION_GROUP}
    assert position == events_log_end(bootstrap, config.events_topic)
    stored = {key: o for key, o in stored.items() if key[0] != POSITION_GROUP}
    assert stored == expected and stored
    # ...and a coordinator reloaded from the store answers OffsetFetch as the live one does.
    reloaded = GroupCoordinator(CoordinatorConfig())
    reloaded.load_records(records, now_ms=feed[-1]["ts"])
    for group_id in ("group-0", "group-1"):
        assert reloaded.fetch_offsets(group_id) == coordinator.fetch_offsets(group_id)
    return got


def test_tracker_end_to_end_with_a_restart(spark, kafka_bootstrap, topic_name, tmp_path):
    feed = recorded_feed()
    config = tracker_config(kafka_bootstrap, topic_name, tmp_path, metrics_port=0)
    first_half(kafka_bootstrap, config, feed)

    view = LiveView(out=io.StringIO(), redraw=False)
    tracker = start_tracker(spark, config, view)
    try:
        tracker.query.processAllAvailable()
        metrics = urllib.request.urlopen(tracker.metrics_url, timeout=10).read().decode()
    finally:
        tracker.stop()
    # The metrics endpoint answered while the job ran, with what the job had emitted so far.
    samples = {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for family in text_string_to_metric_families(metrics)
        for x in family.samples
    }
    assert view.groups["group-0"].rebalances > 0
    assert (
        samples[("rebalance_tracker_group_rebalances_total", (("group", "group-0"),))]
        == view.groups["group-0"].rebalances
    )
    assert samples[("rebalance_tracker_dead_lettered_events_total", ())] == 1

    second_half(kafka_bootstrap, config, feed)
    # Restarted reading (and so writing) with confluent-kafka: the same checkpoint, topics and records.
    tracker = start_tracker(
        spark, dataclasses.replace(config, kafka_source="confluent"), LiveView(out=io.StringIO(), redraw=False)
    )
    assert tracker.sink.producer_client == "confluent"
    try:
        tracker.query.processAllAvailable()
    finally:
        tracker.stop()

    check_tracker_run(kafka_bootstrap, config, feed)
