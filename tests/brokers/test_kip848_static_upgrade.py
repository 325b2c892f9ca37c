"""A rolling upgrade of static members on Apache Kafka 4.4 (fixture ``apache_kafka4``), with confluent-kafka consumers
each in its own process: the way a StatefulSet's pods restart, each keeping its ``group.instance.id``. Classic static
members k0 (instance i0) and k1 (i1) form a group; k0 closes (a static member sends no LeaveGroup) and comes back at
once as c0, the same instance with the consumer protocol: Kafka upgrades the group online and c0 takes k0's place
and partitions (GroupMetadataManagerTest's testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember); then k1
comes back as c1 and takes k1's place inside the consumer group (...FromExistingClassicStaticMember); n0, a new
classic static member (i2), joins the consumer group (testJoiningConsumerGroupWithNewStaticMember). Then rolled back
the same way: c0 closes (a static leave, epoch -2) and comes back as r0 with the classic protocol, taking c0's place
inside the consumer group, and is restarted once more as q0 (a classic member replacing a classic one inside the
consumer group); c1 comes back as r1, the last consumer-protocol member replaced, which downgrades the group
(testLastStaticConsumerProtocolMemberReplacedByClassicProtocolMember); q0, n0 and r1 close. The broker's records go
through the cluster feed into the tracker's models, which must tell the same story: no rebalance where the broker
made none, the broker's epochs, the five replacements, each member's assignment as its consumer was given it, every
record explained."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from offsets_store import decode_record
from streaming.feeds.cluster_feed import read_offsets_topic
from streaming.feeds.consumer_feed import is_consumer_group_record
from tests.broker_history import wait_until
from tests.brokers.test_kip848_kafka import assignments_given, assignments_told, one_topic_history, produce
from tests.brokers.test_kip848_migration import first_member_ids, through_the_tracker
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

PARTITIONS = 4


@pytest.fixture(scope="module")
def upgrade(apache_kafka4, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    history = one_topic_history(apache_kafka4, "static", tmp_path_factory, PARTITIONS, 20)
    bootstrap, group, topic = apache_kafka4.bootstrap, history.group, history.topics["a"]
    try:
        history.start("k0", group_protocol="classic", group_instance_id="i0")
        history.start("k1", group_protocol="classic", group_instance_id="i1")
        history.settled("k0 and k1 (classic, static) started")
        history.close("k0")
        history.start("c0", group_instance_id="i0")
        history.settled("k0 restarted as c0 (consumer protocol): the group is upgraded")
        produce(bootstrap, topic, PARTITIONS, 5)
        history.close("k1")
        history.start("c1", group_instance_id="i1")
        history.settled("k1 restarted as c1 (consumer protocol)")
        history.start("n0", group_protocol="classic", group_instance_id="i2")
        history.settled("n0 (classic, static) joined the consumer group")
        history.close("c0")
        history.start("r0", group_protocol="classic", group_instance_id="i0")
        history.settled("c0 rolled back to the classic protocol as r0")
        history.close("r0")
        history.start("q0", group_protocol="classic", group_instance_id="i0")
        history.settled("r0 restarted as q0, classic again")
        history.close("c1")
        history.start("r1", group_protocol="classic", group_instance_id="i1")
        history.settled("c1 rolled back as r1: the group is downgraded")
        history.close("q0")
        history.close("n0")
        history.close("r1")
    finally:
        history.stop_all()
    facts = history.facts()
    ids = first_member_ids(facts)

    def written():  # until the classic group r1's JoinGroup made is in __consumer_offsets
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        records = [r for r in (decode_record(k, v) for k, v, _ in pairs) if r.get("group_id") == group]
        last = [r for r in records if r["type"] == "group_metadata" and not r.get("tombstone")][-1:]
        return pairs if last and ids["r1"] in {m["member_id"] for m in last[0]["members"]} else None

    pairs = wait_until(written, 30, "the downgraded group in __consumer_offsets", every_s=0.5)
    (history.workdir / "consumer_offsets.json").write_text(  # for a look after a failure
        json.dumps([[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in pairs])
    )
    followed = through_the_tracker(bootstrap, group, pairs)
    print(
        f"\nstatic members' rolling upgrade and back on Apache Kafka {apache_kafka4.version}: "
        f"{time.monotonic() - started:.1f} s, {len(followed.events)} events, {dict(followed.feed.consumer.counts)}"
    )
    release = tuple(int(n) for n in apache_kafka4.version.split(".")[:2])
    return SimpleNamespace(workdir=history.workdir, facts=facts, ids=ids, release=release, **vars(followed))


def epochs(records):
    return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]


def test_the_feed_explains_every_record(upgrade):
    counts = upgrade.feed.consumer.counts
    assert upgrade.rejected == 0
    assert counts["unexplained records"] == 0, f"workdir {upgrade.workdir}"
    assert counts["consumer group records"] == sum(1 for r in upgrade.broker if is_consumer_group_record(r))
    assert (upgrade.feed.counts["online upgrades"], upgrade.feed.counts["online downgrades"]) == (1, 1)
    switches = [(o["from"], o["to"]) for o in upgrade.outputs if o["type"] == "protocol_switch"]
    assert switches == [("classic", "consumer"), ("consumer", "classic")]


def test_a_static_member_taking_its_place_is_no_rebalance(upgrade):
    """Kafka 4.1+ converts the group with its subscribed topics' metadata (the epoch record's hash): the first
    heartbeat after the upgrade, c0 taking k0's place, finds nothing changed and bumps no epoch; nor does any other
    replacement. The one new epoch is n0's, a new member. (Kafka 4.0 converts without the metadata, and the upgrade's
    heartbeat writes it and bumps the epoch once more: ``APACHE_KAFKA_VERSION=4.0.0``.)"""
    broker = epochs(upgrade.broker)
    first = broker[0]
    assert broker == [first + n for n in range(2 if upgrade.release >= (4, 1) else 3)], broker
    assert epochs(o for o in upgrade.outputs if is_consumer_group_record(o)) == broker
    replaced = [(o["previous_member_id"], o["member_id"]) for o in upgrade.outputs if o["type"] == "member_replaced"]
    ids = upgrade.ids
    assert replaced == [
        (ids["k0"], ids["c0"]),
        (ids["k1"], ids["c1"]),
        (ids["c0"], ids["r0"]),
        (ids["r0"], ids["q0"]),
        (ids["c1"], ids["r1"]),
    ]
    gone = [(o["member_id"], o["reason"], o.get("temporary")) for o in upgrade.outputs if o["type"] == "member_left"]
    assert gone == [(upgrade.ids["c0"], "static leave", True), (upgrade.ids["c1"], "static leave", True)]
    assert not [o for o in upgrade.outputs if o["type"] == "member_expired"]


def test_each_members_assignment_is_what_its_consumer_was_given(upgrade):
    given = assignments_given(upgrade.facts)
    assert assignments_told(upgrade.outputs) == given, f"workdir {upgrade.workdir}"
    assert set(given) == set(upgrade.ids.values())
