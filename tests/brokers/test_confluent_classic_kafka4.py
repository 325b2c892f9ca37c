"""Issue #31: the classic history of the modern-Kafka issue (#29) with confluent-kafka (librdkafka) classic consumers
on Apache Kafka 4.4 (fixture ``apache_kafka4``), each in its own process (``tests/confluent_consumer.py`` with
``group_protocol=classic``: the eager ``range`` assignor, librdkafka's default), driven by the consumer-protocol
history's harness (``History`` of ``test_kip848_kafka``), and the broker's own ``__consumer_offsets`` through the
classic cluster feed into the classic model.

The history, shorter than #29's (kafka-python's, ``tests/kafka4_history.py``): k0 starts, then k1; k2 is added; k1
closes (a LeaveGroup); s0, a static member, is added; k0 is killed (its session runs out); s0 restarts within its
session (librdkafka sends no LeaveGroup for a static member: its new member id takes its old place in the same
generation); the topic grows from 4 to 6 partitions (the leader sees it and rejoins); k2 closes; s0 closes last and
its session runs out (the Empty record).

Checked: every generation the broker recorded (members, leader, who got what) is the tracker's, each member's
assignments are what its consumer's callbacks gave it, who left, expired and was replaced is what the consumers did,
and the final offsets are what they committed and what the broker answers.
"""

from __future__ import annotations

import collections
import time
from types import SimpleNamespace

import pytest

from offsets_store import decode_record, encode_record
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed, events_from, read_offsets_topic
from tests.broker_history import story as told
from tests.broker_history import wait_until
from tests.brokers.test_kip848_kafka import assignments_given, committed_by_truth, grow, one_topic_history
from tests.groups import OWN_PROCESSES
from tests.kafka4_history import committed_on

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

PARTITIONS, GROWN_TO = 4, 6
# Short sessions and frequent heartbeats (a rebalance reaches the others at their next heartbeat); the leader looks
# at the topic's metadata every second, so it soon sees the new partitions. s0's session is longer, so that its
# restart (a new process) comes back within it.
CLASSIC = {
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 300,
    "topic.metadata.refresh.interval.ms": 1000,
}
STATIC = {**CLASSIC, "session.timeout.ms": 6000}


@pytest.fixture(scope="module")
def classic(apache_kafka4, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    history = one_topic_history(apache_kafka4, "classic-rk", tmp_path_factory, PARTITIONS, 30)
    bootstrap, group, topic = apache_kafka4.bootstrap, history.group, history.topics["a"]

    def start(name: str, settings: dict = CLASSIC, **more) -> None:
        history.start(name, group_protocol="classic", librdkafka=settings, **more)

    try:
        start("k0")
        history.settled("k0 started")
        start("k1")
        history.settled("k1 added")
        start("k2")
        history.settled("k2 added")
        history.close("k1")
        history.settled("k1 closed")
        start("s0", STATIC, group_instance_id="s0")
        history.settled("s0 added (static)")
        history.kill("k0")
        history.settled("k0 killed: its session ran out")
        history.close("s0")  # no LeaveGroup: its place waits for it
        start("s0", STATIC, group_instance_id="s0")
        history.settled("s0 restarted within its session")
        grow(bootstrap, topic, GROWN_TO)
        history.sizes[topic] = GROWN_TO
        history.settled(f"the topic grew to {GROWN_TO} partitions")
        time.sleep(1)  # a commit or two in this generation
        history.close("k2")
        history.settled("k2 closed")
        history.close("s0")  # the last, without a LeaveGroup: its session runs out and the group goes Empty
    finally:
        history.stop_all()

    def empty():
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        last = [
            r
            for r in (decode_record(k, v) for k, v, _ in pairs)
            if r.get("group_id") == group and r["type"] == "group_metadata" and not r["tombstone"]
        ]
        return pairs if last and last[-1]["generation"] > 0 and not last[-1]["members"] else None

    pairs = wait_until(empty, 30, "the group's Empty record", every_s=0.5)
    feed = ClusterFeed()
    events = [e for e in events_from(pairs, feed) if e["group_id"] == group]
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += tracker.handle(event)
    print(
        f"\nclassic history (confluent-kafka) on Apache Kafka {apache_kafka4.version}: "
        f"{time.monotonic() - started:.1f} s, {len(events)} feed events"
    )
    return SimpleNamespace(
        group=group,
        topic=topic,
        facts=history.facts(),
        pairs=pairs,
        events=events,
        outputs=outputs,
        tracker=tracker,
        committed=committed_on(bootstrap, group, topic, GROWN_TO),
    )


def recorded_generations(pairs, group: str) -> dict[int, tuple]:
    """generation -> (leader, member -> sorted partitions) of the group's first GroupMetadata record of it (a
    static member's replacement is recorded again in its generation)."""
    out: dict[int, tuple] = {}
    for key, value, _ in pairs:
        r = decode_record(key, value)
        if r.get("group_id") == group and r["type"] == "group_metadata" and not r["tombstone"] and r["members"]:
            out.setdefault(
                r["generation"],
                (r["leader"], {m["member_id"]: sorted(map(list, m["assignment"]["partitions"])) for m in r["members"]}),
            )
    return out


def ids(classic) -> dict[str, list[str]]:
    """client -> its member ids, in order."""
    out: dict[str, list[str]] = collections.defaultdict(list)
    for f in classic.facts:
        if f["fact"] in ("assign", "revoke") and f["member_id"] and f["member_id"] not in out[f["client"]]:
            out[f["client"]].append(f["member_id"])
    return dict(out)


def test_every_record_round_trips_byte_exact(classic):
    for key, value, _ in classic.pairs:
        assert encode_record(decode_record(key, value)) == (key, value)


def test_generations_are_the_brokers_and_what_the_consumers_were_given(classic):
    said = told(classic.outputs, classic.group)
    assert said["generations"] == recorded_generations(classic.pairs, classic.group)
    # each member's assignments, in order, as its callbacks gave them (eager: revoke all, assign the new share); a
    # static member restarted within its session holds its old id's share in the same generation
    seq: dict[str, list[frozenset]] = collections.defaultdict(list)
    current: dict[str, frozenset] = {}

    def hold(member: str, held: frozenset) -> None:
        if held and (not seq[member] or seq[member][-1] != held):
            seq[member].append(held)

    for o in classic.outputs:
        if o["type"] == "rebalance" and o["members"]:
            current = {m: frozenset(map(tuple, parts)) for m, parts in o["assignment"].items()}
            for member, held in current.items():
                hold(member, held)
        elif o["type"] == "member_replaced":
            hold(o["member_id"], current[o["previous_member_id"]])
    assert dict(seq) == assignments_given(classic.facts)
    # the growth: the last generations hold the topic's six partitions
    assert sorted(tp for parts in said["generations"][max(said["generations"])][1].values() for tp in parts) == [
        [classic.topic, p] for p in range(GROWN_TO)
    ]


def test_leaves_expiries_and_the_static_restart(classic):
    said, member = told(classic.outputs, classic.group), ids(classic)
    assert [len(member[c]) for c in ("k0", "k1", "k2", "s0")] == [1, 1, 1, 2]
    assert said["left"] == sorted([member["k1"][0], member["k2"][0]])
    assert said["expired"] == sorted([(member["k0"][0], "session timeout"), (member["s0"][1], "session timeout")])
    assert said["replaced"] == [(member["s0"][0], member["s0"][1])]
    assert said["refused_commits"] == []


def test_final_offsets_are_the_brokers(classic):
    tracked = {tp: o["offset"] for tp, o in classic.tracker.fetch_offsets(classic.group).items()}
    assert tracked == committed_by_truth(classic.facts) == classic.committed
    assert classic.tracker.describe_group(classic.group)["state"] == "Empty"
