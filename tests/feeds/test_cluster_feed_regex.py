"""The cluster feed on regex subscriptions that Apache Kafka 4.4.0 wrote (one group's ``__consumer_offsets`` records
from runs of tests/brokers/test_kip848_regex.py, as key/value hex and log timestamp; the group computed targets at
once): c0 subscribed to ``^rx<suffix>-.*`` and c1 to topic a by name; topic b was created and the broker's refresh
gave it to c0; both closed. Kafka wrote each regex resolution as a write of its own after the request that asked
for it (the regex's record and a new group epoch): in ``kafka44_regex.json`` right after c0's join, in
``kafka44_regex_interleaved.json`` after c1's join, which the broker handled before c0's regex was resolved; in
``kafka44_regex_refresh.json`` c1's join came between too, and the refresh came 9 998 ms after the first resolution
was written -- 10 002 ms after it started, the time Kafka counts from (the record's timestamp). The feed tells each
resolution as a ``regex_resolved`` event with that start, and the model (``regex.resolution.events``) resolves then. No
broker needed: read whole, or followed batch by batch, the feed explains every record and the tracker writes the
broker's."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from offsets_store import decode_record
from tests.broker_history import followed
from tests.brokers.test_kip848_kafka import consumer_model_outputs
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.feeds.cluster_feed import ClusterFeed, events_from, tracker_settings
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed, is_consumer_group_record
from streaming.feeds.consumer_feed import normalise

RECORDINGS = {
    name: json.loads((Path(__file__).parent / f"{name}.json").read_text())
    for name in ("kafka44_regex", "kafka44_regex_interleaved", "kafka44_regex_refresh")
}
KAFKA_4_4_AT_ONCE = {
    **CONSUMER_OBSERVER_SETTINGS,
    "initial.group.epoch": 1,
    "empty.group.assignment.epoch": "true",
    "upgrade.with.metadata": "true",
    "group.consumer.assignment.interval.ms": 0,
}


@pytest.mark.parametrize("recording", list(RECORDINGS))
@pytest.mark.parametrize("follow", [False, True], ids=["read whole", "followed"])
def test_the_feed_explains_a_regex_subscription_and_the_tracker_writes_the_brokers_records(recording, follow):
    log = RECORDINGS[recording]
    pairs = [(bytes.fromhex(k), None if v is None else bytes.fromhex(v), ts) for k, v, ts in log["records"]]
    topics = {name: tuple(v) for name, v in log["topics"].items()}
    consumer = ConsumerGroupFeed(ConsumerGroupConfig.from_properties(KAFKA_4_4_AT_ONCE), topics=topics.get)
    events = list(events_from(followed(pairs) if follow else pairs, ClusterFeed(consumer)))
    broker = [decode_record(k, v) for k, v, _ in pairs]
    assert consumer.counts["unexplained records"] == 0
    assert consumer.counts["consumer group records"] == sum(1 for r in broker if is_consumer_group_record(r))
    assert sum(e["type"] == "regex_resolved" for e in events) == 2
    # the regex resolved after c0's join, refreshed with topic b, deleted at c0's leave
    regexes = [r for r in broker if r["type"] == "consumer_group_regular_expression"]
    assert [sorted(r["topics"]) if not r.get("tombstone") else None for r in regexes] == [
        sorted(topics)[:1],
        sorted(topics),
        None,
    ]
    outputs = consumer_model_outputs(events, tracker_settings(consumer.config))
    ours = collections.Counter(
        normalise(o)
        for o in outputs
        if is_consumer_group_record(o) and (o["type"] != "consumer_group_partition_metadata" or o["tombstone"])
    )
    assert ours == collections.Counter(normalise(r) for r in broker if is_consumer_group_record(r))
