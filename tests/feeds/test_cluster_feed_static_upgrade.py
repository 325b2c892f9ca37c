"""The cluster feed on a rolling upgrade of static members, as Apache Kafka 4.4.0 and 4.0.0 wrote it (one group's
``__consumer_offsets`` records from runs of tests/brokers/test_kip848_static_upgrade.py, key/value hex and log
timestamp): classic static members k0 (instance i0) and k1 (i1); k0 restarted as c0 with the consumer protocol (the
online upgrade, c0 taking k0's place in the same write), k1 as c1 (taking its place inside the consumer group); n0,
a new classic static member, joined; then rolled back: c0 closed (a static leave) and came back as r0 with the
classic protocol, taking c0's place, r0 restarted as q0 (classic again), and c1 came back as r1, the last
consumer-protocol member replaced (the online downgrade, in the same write). Kafka 4.4 bumps the group epoch for n0
only; 4.0 once more, at the upgrade (it converts the group without its topics' metadata). No broker needed: read
whole, or followed batch by batch, the feed explains every record and the tracker writes the broker's epochs and
tells the five replacements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsets_store import decode_record
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, is_consumer_group_record
from tests.broker_history import followed
from tests.feeds.test_cluster_feed_migration import run

HERE = Path(__file__).parent
# What cluster-feed finds out of each broker (streaming/kafka_client/broker_features.py)
KAFKA_4_4 = {
    **CONSUMER_OBSERVER_SETTINGS,
    "initial.group.epoch": 1,
    "empty.group.assignment.epoch": "true",
    "upgrade.with.metadata": "true",
    "group.consumer.assignment.interval.ms": 1000,
}
RECORDINGS = {
    "4.4": (json.loads((HERE / "kafka44_static_upgrade.json").read_text()), KAFKA_4_4, True),
    # 4.0 writes ConsumerGroupPartitionMetadata: the feed reads the topics there, not from the cluster
    "4.0": (json.loads((HERE / "kafka40_static_upgrade.json").read_text()), CONSUMER_OBSERVER_SETTINGS, False),
}


def pairs(log: dict) -> list[tuple]:
    return [(bytes.fromhex(k), None if v is None else bytes.fromhex(v), ts) for k, v, ts in log["records"]]


def epochs(records):
    return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]


@pytest.mark.parametrize("release", list(RECORDINGS))
@pytest.mark.parametrize("follow", [False, True], ids=["read whole", "followed"])
def test_the_feed_explains_static_members_restarted_with_the_consumer_protocol(release, follow):
    log, settings, cluster_topics = RECORDINGS[release]
    feed, outputs = run(followed(pairs(log)) if follow else pairs(log), log, settings, cluster_topics)
    broker = [decode_record(k, v) for k, v, _ in pairs(log)]
    assert feed.consumer.counts["unexplained records"] == 0
    assert feed.consumer.counts["consumer group records"] == sum(1 for r in broker if is_consumer_group_record(r))
    assert (feed.counts["online upgrades"], feed.counts["online downgrades"]) == (1, 1)
    first = epochs(broker)[0]
    assert epochs(broker) == [first + n for n in range(2 if release == "4.4" else 3)]
    assert epochs(outputs) == epochs(broker)
    # each replacement's successor: the member id whose own metadata record (after its predecessor's, taken over)
    # names the client
    clients = {
        r["member_id"]: r["clientId"]
        for r in broker
        if r["type"] == "consumer_group_member_metadata" and not r.get("tombstone")
    }
    replaced = [(o["instance_id"], clients[o["member_id"]]) for o in outputs if o["type"] == "member_replaced"]
    assert replaced == [("i0", "c0"), ("i1", "c1"), ("i0", "r0"), ("i0", "q0"), ("i1", "r1")]
    assert [o["reason"] for o in outputs if o["type"] == "member_left"] == ["static leave"] * 2
    assert not [o for o in outputs if o["type"] == "member_expired"]


def test_a_4_4_static_upgrade_read_as_4_0_would_be_is_not_explained():
    """The setting is what explains it: a model converting as 4.0 does bumps an epoch the 4.4 broker did not."""
    log, settings, _ = RECORDINGS["4.4"]
    feed, _ = run(pairs(log), log, {**settings, "upgrade.with.metadata": "false"}, True)
    assert feed.consumer.counts["unexplained records"] > 0
