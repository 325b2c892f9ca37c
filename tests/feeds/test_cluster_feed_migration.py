"""The cluster feed on a rolling upgrade and back that Apache Kafka 4.4.0 wrote (``kafka44_migration.json``: one
group's ``__consumer_offsets`` records from a run of tests/brokers/test_kip848_migration.py, as key/value hex and log
timestamp; classic consumers k0, k1 -> c0 joins (the upgrade) -> k0 closes, c1 joins -> k2 joins (classic) -> c0,
then c1 close (the downgrade) -> k1, k2 close), the group set to compute targets at once
(``consumer.assignment.interval.ms=0``); and ``kafka44_migration_deferred.json``, the same history with the broker's
default interval (1000 ms), in which k2's JoinGroup came 198 ms after the last target: Kafka bumped the group epoch
and wrote no target (k2 Stable at the last one's epoch, with nothing), the next heartbeat after the interval did --
with the consumers' assignments as their rebalance callbacks gave them (``given``, by member id). No broker needed:
read whole, or followed batch by batch, the feed explains every record and the tracker tells the broker's story."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsets_store import decode_record
from tests.broker_history import followed
from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.coordinator.routing import Configs, GroupModels
from streaming.feeds.cluster_feed import ClusterFeed, events_from, tracker_settings
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed, is_consumer_group_record

LOG = json.loads((Path(__file__).parent / "kafka44_migration.json").read_text())
DEFERRED = json.loads((Path(__file__).parent / "kafka44_migration_deferred.json").read_text())
KAFKA_4_4 = {
    **CONSUMER_OBSERVER_SETTINGS,
    "initial.group.epoch": 1,
    "empty.group.assignment.epoch": "true",
    "upgrade.with.metadata": "true",
}
# What cluster-feed finds out of a 4.4 broker: its default assignment interval
KAFKA_4_4_DEFAULTS = {**KAFKA_4_4, "group.consumer.assignment.interval.ms": 1000}
RECORDINGS = {"interval 0": (LOG, KAFKA_4_4), "default interval": (DEFERRED, KAFKA_4_4_DEFAULTS)}


def pairs(log: dict = LOG) -> list[tuple]:
    return [(bytes.fromhex(k), None if v is None else bytes.fromhex(v), ts) for k, v, ts in log["records"]]


def run(source: list, log: dict = LOG, settings: dict = KAFKA_4_4, cluster_topics: bool = True):
    """The feed over ``source`` and the tracker's models over its events. ``cluster_topics``: the topics come from
    the recording's cluster (Kafka 4.1+), not from ConsumerGroupPartitionMetadata records in the log (4.0)."""
    topics = {name: tuple(v) for name, v in log["topics"].items()}
    consumer = ConsumerGroupFeed(
        ConsumerGroupConfig.from_properties(settings), topics=topics.get if cluster_topics else None
    )
    feed = ClusterFeed(consumer)
    events = list(events_from(source, feed))
    models, outputs = GroupModels(Configs.from_properties(tracker_settings(consumer.config))), []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += models.advance(event["ts"] - 1) + models.handle(event)
    return feed, outputs


@pytest.mark.parametrize("recording", list(RECORDINGS))
@pytest.mark.parametrize("follow", [False, True], ids=["read whole", "followed"])
def test_the_feed_explains_a_kafka_4_4_rolling_upgrade_and_back(recording, follow):
    log, settings = RECORDINGS[recording]
    feed, outputs = run(followed(pairs(log)) if follow else pairs(log), log, settings)
    broker = [decode_record(k, v) for k, v, _ in pairs(log)]
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


@pytest.mark.parametrize("follow", [False, True], ids=["read whole", "followed"])
def test_each_members_assignment_with_the_default_interval_is_what_its_consumer_was_given(follow):
    """The broker test's assertion, on the run that failed it before the model's classic JoinGroup waited for the
    interval too (it computed a target the broker had deferred: three records unexplained, k2's assignments off)."""
    feed, outputs = run(followed(pairs(DEFERRED)) if follow else pairs(DEFERRED), DEFERRED, KAFKA_4_4_DEFAULTS)
    assert feed.consumer.counts["unexplained records"] == 0
    seq: dict[str, list[list]] = {}
    for o in outputs:
        if o["type"] != "assignment":
            continue
        held = sorted([t, p] for t, p in o["partitions"])
        if held and (not seq.get(o["member_id"]) or seq[o["member_id"]][-1] != held):
            seq.setdefault(o["member_id"], []).append(held)
    assert seq == DEFERRED["given"]
    assert sorted(DEFERRED["clients"][m] for m in seq) == ["c0", "c1", "k0", "k1", "k2"]
    # k2 joined within the interval: Stable at the last target's epoch with nothing, its partition at the next one
    k2 = next(m for m, c in DEFERRED["clients"].items() if c == "k2")
    first = next(o for o in outputs if o["type"] == "join_response" and o["member_id"] == k2)
    joined_at = first["generation"]
    epochs = [o["assignment_epoch"] for o in outputs if o["type"] == "target_assignment"]
    assert joined_at in epochs and joined_at + 1 in epochs
