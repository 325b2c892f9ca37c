"""Issue #31's rolling upgrade and back on Apache Kafka 4.4 (fixture ``apache_kafka4``), with confluent-kafka
consumers each in its own process: classic consumers k0 and k1 form a group; c0 joins with the consumer protocol --
Kafka upgrades the group online (``group.consumer.migration.policy=bidirectional``, its default), k0 and k1 staying in
it as classic members; k0 closes and c1 joins; k2 joins with the classic protocol (a classic member joining the
consumer group); c0 closes; c1, the last member of the consumer protocol, closes -- Kafka downgrades the group to a
classic group, which rebalances; k1 and k2 close. The broker's records go through the cluster feed into the tracker's
models (streaming/coordinator/routing.py, consumer/classic_members.py), which must tell the same story: nobody leaves
who did not, the broker's epochs and generations, each member's assignment as its consumer was given it, every
record explained, the committed offsets the broker's. The classic consumers run librdkafka's default assignors
(``range,roundrobin``: eager) and, a second time, ``cooperative-sticky`` (a classic member's cooperative
rebalance inside the consumer group: its JoinGroup names the partitions it owns, and it keeps them; k1 then joins
after c0, see ``CLASSIC_ASSIGNORS``).

The group runs with the broker's defaults for targets (Kafka 4.4: ``group.consumer.assignment.interval.ms=1000``),
and the feed with what ``cluster-feed`` finds out from the broker (that default): whether a member's request comes
within the interval of the last target varies from run to run (k2's JoinGroup did in 2 runs of 5)."""

from __future__ import annotations

import base64
import collections
import json
import time
from types import SimpleNamespace

import pytest

from offsets_store import decode_record, encode_record
from offsets_store.codec import decode_subscription
from streaming.coordinator import parse_event
from streaming.coordinator.routing import Configs, GroupModels
from streaming.feeds.cluster_feed import ClusterFeed, events_from, read_offsets_topic, tracker_settings
from streaming.feeds.cluster_feed import consumer_group_feed
from streaming.feeds.consumer_feed import is_consumer_group_record
from tests.broker_history import wait_until
from tests.brokers.test_kip848_kafka import (
    assignments_given,
    assignments_told,
    committed_by_truth,
    one_topic_history,
    produce,
)
from tests.kafka4_history import committed_on
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

PARTITIONS = 4
CLOSING_ORDER = ("k0", "c0", "c1", "k1", "k2")


def through_the_tracker(bootstrap: str, group: str, pairs: list[tuple]) -> SimpleNamespace:
    """``group``'s records of ``pairs`` through the cluster feed as `cluster-feed` builds it (the broker's settings,
    found from its ApiVersions) and the tracker's models as routing.run_feed runs them, keeping the models for their
    offsets: the feed, its events, the models' outputs, events refused, the models."""
    consumer, _ = consumer_group_feed(bootstrap, {}, {})
    feed = ClusterFeed(consumer)
    own = [(k, v, ts) for k, v, ts in pairs if decode_record(k, v).get("group_id") == group]
    events = [e for e in events_from(own, feed) if e["group_id"] == group]
    if consumer.topics is not None:  # Kafka 4.1+: asked of the cluster
        consumer.topics.close()
    models, outputs, rejected = GroupModels(Configs.from_properties(tracker_settings(consumer.config))), [], 0
    for raw in events:
        event, error = parse_event(raw)
        if error is not None:
            rejected += 1
            continue
        outputs += models.advance(event["ts"] - 1) + models.handle(event)
    outputs += models.advance(max(e["ts"] for e in events))
    return SimpleNamespace(
        feed=feed,
        events=events,
        outputs=outputs,
        rejected=rejected,
        models=models,
        broker=[{**decode_record(k, v), "ts": ts} for k, v, ts in own],
    )


# librdkafka's cooperative-sticky leader (2.16) puts its sticky state in the assignment's userData from the first
# rebalance after a member held partitions, and Kafka refuses to upgrade such a group ("userData from a custom assignor
# would be lost": the consumer-protocol member's heartbeat fails, GROUP_ID_NOT_FOUND, fatal in librdkafka). So the
# cooperative history upgrades the group from its first generation, k0 alone, and k1 joins it inside the consumer
# group; the model refuses the same upgrade (test_consumer_migration.py, the custom assignor's user data).
CLASSIC_ASSIGNORS = {"eager": "range,roundrobin", "cooperative": "cooperative-sticky"}


@pytest.fixture(scope="module", params=list(CLASSIC_ASSIGNORS))
def migration(apache_kafka4, tmp_path_factory, request):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    history = one_topic_history(apache_kafka4, "migrate", tmp_path_factory, PARTITIONS, 20)
    bootstrap, group, topic = apache_kafka4.bootstrap, history.group, history.topics["a"]
    classic = {
        "group_protocol": "classic",
        "librdkafka": {"partition.assignment.strategy": CLASSIC_ASSIGNORS[request.param]},
    }
    cooperative = request.param == "cooperative"
    try:
        history.start("k0", **classic)
        if not cooperative:
            history.start("k1", **classic)
        history.settled("k0 and k1 (classic) started" if not cooperative else "k0 (classic) started")
        history.start("c0")
        history.settled("c0 (consumer protocol) joined: the group is upgraded")
        if cooperative:  # see CLASSIC_ASSIGNORS
            history.start("k1", **classic)
            history.settled("k1 (classic) joined the consumer group")
        produce(bootstrap, topic, PARTITIONS, 5)  # commits by members of both protocols in the consumer group
        history.close("k0")
        history.start("c1")
        history.settled("k0 closed, c1 joined")
        history.start("k2", **classic)
        history.settled("k2 (classic) joined the consumer group")
        history.close("c0")
        history.settled("c0 closed")
        history.close("c1")
        history.settled("c1 closed: the group is downgraded and rebalances")
        produce(bootstrap, topic, PARTITIONS, 5)  # commits in the classic group again
        history.close("k1")
        history.settled("k1 closed")
        history.close("k2")
    finally:
        history.stop_all()
    facts = history.facts()

    def written():  # until the group is Empty in __consumer_offsets (k2's leave, its last write)
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        records = [decode_record(k, v) for k, v, _ in pairs]
        last = [r for r in records if r.get("group_id") == group and r["type"] == "group_metadata"]
        return pairs if last and not last[-1].get("tombstone") and not last[-1]["members"] else None

    pairs = wait_until(written, 30, "the group Empty in __consumer_offsets", every_s=0.5)
    (history.workdir / "consumer_offsets.json").write_text(  # for a look after a failure
        json.dumps([[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in pairs])
    )
    followed = through_the_tracker(bootstrap, group, pairs)
    assert followed.feed.consumer.config.group_consumer_assignment_interval_ms == 1000  # Kafka 4.4's default
    elapsed = time.monotonic() - started
    print(
        f"\nrolling upgrade and back ({request.param} classic members) on Apache Kafka {apache_kafka4.version}: "
        f"{elapsed:.1f} s, "
        f"{len(followed.events)} events, {dict(followed.feed.consumer.counts)}, {dict(followed.feed.counts)}"
    )
    return SimpleNamespace(
        workdir=history.workdir,
        group=group,
        topic=topic,
        facts=facts,
        ids=first_member_ids(facts),
        pairs=pairs,
        feed=followed.feed,
        events=followed.events,
        outputs=followed.outputs,
        rejected=followed.rejected,
        model=followed.models.models[group],
        broker=followed.broker,
        committed=committed_on(bootstrap, group, topic, PARTITIONS),
        assignors=request.param,
    )


def first_member_ids(facts: list[dict]) -> dict[str, str]:
    """client -> the first member id it reported."""
    ids: dict[str, str] = {}
    for f in facts:
        if f.get("member_id"):
            ids.setdefault(f["client"], f["member_id"])
    return ids


def test_the_brokers_records_round_trip_byte_exact(migration):
    """Classic members inside a consumer group: their ConsumerGroupMemberMetadata carries classicMemberMetadata (the
    JoinGroup's protocols); every record decodes and re-encodes byte for byte."""
    for key, value, _ in migration.pairs:
        assert encode_record(decode_record(key, value)) == (key, value)
    kinds = collections.Counter(r["type"] for r in migration.broker)
    assert kinds["group_metadata"] >= 3 and kinds["consumer_group_member_metadata"] >= 4
    assert any(r.get("classicMemberMetadata") for r in migration.broker)


def test_the_classic_members_ran_the_assignors_asked_for(migration):
    """Inside the consumer group the classic members' records carry their JoinGroups' protocols; a cooperative one
    rejoined naming the partitions it owned (the embedded subscription's ownedPartitions) and kept them."""
    classic = [
        r["classicMemberMetadata"]["supportedProtocols"]
        for r in migration.broker
        if r["type"] == "consumer_group_member_metadata" and not r.get("tombstone") and r.get("classicMemberMetadata")
    ]
    assert {p["name"] for protocols in classic for p in protocols} == set(
        CLASSIC_ASSIGNORS[migration.assignors].split(",")
    )
    owned = [decode_subscription(base64.b64decode(ps[0]["metadata"]))["owned_partitions"] for ps in classic]
    assert any(owned) == (migration.assignors == "cooperative")


def test_the_feed_explains_every_record(migration):
    """The upgrade's batch (GroupMetadata tombstone, then the consumer group with its classic members, then c0's
    join) is c0's heartbeat; the classic members' writes are their JoinGroups and LeaveGroups; the downgrade's batch
    (the consumer group's tombstones, then the classic GroupMetadata) is c1's leave."""
    counts = migration.feed.consumer.counts
    assert migration.rejected == 0
    assert counts["unexplained records"] == 0
    assert counts["consumer group records"] == sum(1 for r in migration.broker if is_consumer_group_record(r))
    assert counts["commits the model refuses"] == 0 and counts["commits by the partition's owner"] > 0
    assert migration.feed.counts["online upgrades"] == 1 and migration.feed.counts["online downgrades"] == 1
    switches = [(o["from"], o["to"]) for o in migration.outputs if o["type"] == "protocol_switch"]
    assert switches == [("classic", "consumer"), ("consumer", "classic")]


def test_nobody_leaves_who_did_not(migration):
    told = [o["member_id"] for o in migration.outputs if o["type"] in ("member_left", "member_expired")]
    assert told == [migration.ids[c] for c in CLOSING_ORDER]


def test_epochs_and_generations_are_the_brokers(migration):
    def epochs(records):
        return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]

    def generations(records):
        return [
            r["generation"]
            for r in records
            if r["type"] == "group_metadata" and not r.get("tombstone") and r["members"]
        ]

    ours = [o for o in migration.outputs if is_consumer_group_record(o) or o["type"] == "group_metadata"]
    assert epochs(ours) == epochs(migration.broker)
    assert generations(ours) == generations(migration.broker)
    # the consumer group starts at the classic group's last generation; the classic group at its last epoch
    broker = migration.broker
    first = next(i for i, r in enumerate(broker) if r["type"] == "consumer_group_metadata")
    last = max(i for i, r in enumerate(broker) if r["type"] == "consumer_group_metadata")
    assert generations(broker[:first])[-1] == epochs(broker)[0]
    assert generations(broker[last:])[0] == epochs(broker)[-1]


def test_each_members_assignment_is_what_its_consumer_was_given(migration):
    seq = assignments_told(migration.outputs)
    given = assignments_given(migration.facts)
    clients = {member_id: client for client, member_id in migration.ids.items()}

    def told(sequences):  # for a failure's message: by client, each assignment as sorted partitions
        return {clients.get(m, m): [sorted(p for _, p in held) for held in s] for m, s in sorted(sequences.items())}

    assert seq == given, f"tracker {told(seq)} != consumers {told(given)}; workdir {migration.workdir}"
    assert set(given) == {migration.ids[c] for c in CLOSING_ORDER}


def test_final_offsets_are_the_brokers(migration):
    tracked = {tp: o["offset"] for tp, o in migration.model.model.fetch_offsets(migration.group).items()}
    assert tracked == committed_by_truth(migration.facts) == migration.committed
    assert len(tracked) == PARTITIONS
