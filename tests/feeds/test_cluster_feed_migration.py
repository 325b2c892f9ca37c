"""The cluster feed on a rolling upgrade and back that Apache Kafka 4.4.0 wrote (``kafka44_migration.json``: one
group's ``__consumer_offsets`` records from a run of tests/brokers/test_kip848_migration.py, as key/value hex and log
timestamp; classic consumers k0, k1 -> c0 joins (the upgrade) -> k0 closes, c1 joins -> k2 joins (classic) -> c0,
then c1 close (the downgrade) -> k1, k2 close). No broker needed: read whole, or followed batch by batch, the feed
explains every record and the tracker tells the broker's story."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsets_store import decode_record
from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.coordinator.routing import Configs, GroupModels
from streaming.feeds.cluster_feed import CAUGHT_UP, ClusterFeed, events_from, tracker_settings
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed, is_consumer_group_record

LOG = json.loads((Path(__file__).parent / "kafka44_migration.json").read_text())
KAFKA_4_4 = {**CONSUMER_OBSERVER_SETTINGS, "initial.group.epoch": 1, "empty.group.assignment.epoch": "true"}


def pairs() -> list[tuple]:
    return [(bytes.fromhex(k), None if v is None else bytes.fromhex(v), ts) for k, v, ts in LOG["records"]]


def followed(log: list[tuple]) -> list:
    """As a following reader hands them over: caught up after each write (a batch: one timestamp)."""
    out = []
    for i, pair in enumerate(log):
        out.append(pair)
        if i + 1 == len(log) or log[i + 1][2] != pair[2]:
            out.append(CAUGHT_UP)
    return out


def run(source: list):
    topics = {name: tuple(v) for name, v in LOG["topics"].items()}
    consumer = ConsumerGroupFeed(ConsumerGroupConfig.from_properties(KAFKA_4_4), topics=topics.get)
    feed = ClusterFeed(consumer)
    events = list(events_from(source, feed))
    models, outputs = GroupModels(Configs.from_properties(tracker_settings(consumer.config))), []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += models.advance(event["ts"] - 1) + models.handle(event)
    return feed, outputs


@pytest.mark.parametrize("source", [pairs, lambda: followed(pairs())], ids=["read whole", "followed"])
def test_the_feed_explains_a_kafka_4_4_rolling_upgrade_and_back(source):
    feed, outputs = run(source())
    broker = [decode_record(k, v) for k, v, _ in pairs()]
    assert feed.consumer.counts["unexplained records"] == 0
    assert feed.consumer.counts["consumer group records"] == sum(1 for r in broker if is_consumer_group_record(r))
    assert (feed.counts["online upgrades"], feed.counts["online downgrades"]) == (1, 1)
    switches = [(o["from"], o["to"], o["reason"].split(":")[0]) for o in outputs if o["type"] == "protocol_switch"]
    assert switches == [("classic", "consumer", "upgrade"), ("consumer", "classic", "downgrade")]

    def epochs(records):
        return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]

    def generations(records):
        return [r["generation"] for r in records if r["type"] == "group_metadata" and not r.get("tombstone")]

    assert epochs(outputs) == epochs(broker)
    assert generations([o for o in outputs if o["type"] == "group_metadata"]) == generations(broker)[1:]
    # who left, in order: the classic ids carry their client's name; c0 and c1 are the consumer-protocol members
    joined = {
        r["member_id"]: r["clientId"]
        for r in broker
        if r["type"] == "consumer_group_member_metadata" and not r.get("tombstone")
    }
    for r in broker:
        for m in (r.get("members") or []) if r["type"] == "group_metadata" else []:
            joined.setdefault(m["member_id"], m["client_id"])
    left = [joined[o["member_id"]] for o in outputs if o["type"] in ("member_left", "member_expired")]
    assert left == ["k0", "c0", "c1", "k1", "k2"]
