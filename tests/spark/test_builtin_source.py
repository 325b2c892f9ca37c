"""Spark's own Kafka connector (``--kafka-source builtin``, and ``auto`` on a real Kafka) runs the tracker end to end
as the Python source does: on one feed, each with its own outputs topic, dead-letter topic, store and checkpoint,
both stopped and restarted from their checkpoints half way, they leave the same outputs, dead letters and store
bytes -- the pure model's (``check_tracker_run``). On Apache Kafka 4 (``apache_kafka4``): the bundled Tansu's
ListOffsets answer hides a partition's last records from the connector (``choose_source``)."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from offsets_store import open_store
from streaming.spark.restore import POSITION_GROUP
from streaming.tracker import start_tracker
from streaming.views.live_view import LiveView
from tests.tracker.test_tracker_kafka import (
    check_tracker_run,
    first_half,
    read_all,
    recorded_feed,
    second_half,
    tracker_config,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def stored_bytes(config) -> dict:
    """The store's __consumer_offsets key/value bytes, but the tracker's own position (stamped with the wall clock)."""
    store = open_store(config.store)
    try:
        position = {r["partition"]: r["offset"] for r in store.load_records() if r.get("group_id") == POSITION_GROUP}
        raw = dict(store.raw_records())
    finally:
        store.close()
    from offsets_store.codec import decode_record

    kept = {k: v for k, v in raw.items() if decode_record(k, v).get("group_id") != POSITION_GROUP}
    return {"records": kept, "position": position}


def test_builtin_source_leaves_what_the_python_source_leaves(spark, apache_kafka4, topic_name, tmp_path):
    from streaming.spark.kafka_source import builtin_kafka_available

    if not builtin_kafka_available(spark):
        pytest.skip("Spark's Kafka connector could not be loaded here (no mvn, or Maven Central unreachable)")
    bootstrap = apache_kafka4.bootstrap
    feed = recorded_feed()
    base = tracker_config(bootstrap, topic_name, tmp_path)
    configs = {
        source: dataclasses.replace(
            base,
            kafka_source=source,
            outputs_topic=f"{topic_name}-{source}-out",
            dlq_topic=f"{topic_name}-{source}.dlq",
            store=f"sqlite:{tmp_path / f'{source}.db'}",
            checkpoint=str(tmp_path / f"{source}-checkpoint"),
        )
        for source in ("python", "auto")
    }
    first_half(bootstrap, base, feed)
    for half in (1, 2):
        if half == 2:
            second_half(bootstrap, base, feed)
        for source, config in configs.items():  # the second time round, each restarts from its checkpoint
            tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
            assert tracker.source == ("builtin" if source == "auto" else "python"), tracker.source_reason
            try:
                tracker.query.processAllAvailable()
            finally:
                tracker.stop()

    outputs = {source: check_tracker_run(bootstrap, config, feed) for source, config in configs.items()}
    assert outputs["auto"] == outputs["python"]
    dead = {
        source: [json.loads(r.value) for r in read_all(bootstrap, config.dlq_topic)]
        for source, config in configs.items()
    }
    assert dead["auto"] == dead["python"] and len(dead["auto"]) == 1
    assert stored_bytes(configs["auto"]) == stored_bytes(configs["python"])


def test_a_checkpoint_the_python_source_wrote_is_resumed_by_the_connector(spark, apache_kafka4, topic_name, tmp_path):
    """Upgrading to the default ``auto``: a job that read with the Python source restarts on its checkpoint with
    Spark's connector, which takes the offsets where the Python source left them (same offsets JSON): every event
    once, the pure model's outputs, dead letter and store."""
    from streaming.spark.kafka_source import builtin_kafka_available

    if not builtin_kafka_available(spark):
        pytest.skip("Spark's Kafka connector could not be loaded here (no mvn, or Maven Central unreachable)")
    bootstrap = apache_kafka4.bootstrap
    feed = recorded_feed()
    config = tracker_config(bootstrap, topic_name, tmp_path)
    first_half(bootstrap, config, feed)
    for source, expected in (("python", "python"), ("auto", "builtin")):
        if source == "auto":
            second_half(bootstrap, config, feed)
        tracker = start_tracker(
            spark, dataclasses.replace(config, kafka_source=source), LiveView(out=io.StringIO(), redraw=False)
        )
        assert tracker.source == expected, tracker.source_reason
        try:
            tracker.query.processAllAvailable()
        finally:
            tracker.stop()
    check_tracker_run(bootstrap, config, feed)
