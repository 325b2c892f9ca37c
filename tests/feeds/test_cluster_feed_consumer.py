"""The cluster feed over KIP-848 consumer-group records: what the consumer model writes for a scripted history (two
joins, a new member and a slow revocation, a static member, a crash expiry, a leave, a static restart, a topic
growing) is encoded with the codec, read back (in memory, and from a compacted topic on the session broker), and
turned into consumer_heartbeat events; fed to a fresh consumer model, those events make it write the same records
at the same times, so the timeline -- epochs, members, target vs current assignments, revocation latency -- is the
history's own. Then records written by hand, byte by byte, as a broker lays them out."""

from __future__ import annotations

import collections
from types import SimpleNamespace

import pytest
from kafka import KafkaProducer

from offsets_store import decode_record, encode_record, partition_for
from streaming.kafka_client.topics import ensure_topics
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed, events_from, read_offsets_topic, summary
from streaming.feeds.consumer_feed import (
    CONSUMER_OBSERVER_SETTINGS,
    ConsumerGroupFeed,
    consumer_group_timeline,
    is_consumer_group_record,
    normalise,
)
from tests.consumer_history import SECOND, START, Client, History, random_history, scripted_history
from tests.offsets.test_offsets_kip848 import AUDIT_ID, NO_TAGS, ORDERS, ORDERS_ID, carr, cstr, i8, i16, i32, key

GROUP = "orders-app"


def broker_records(history) -> list[dict]:
    """What the broker wrote, as the codec's record dicts with their log timestamps."""
    return [o for o in history.outputs if is_consumer_group_record(o)]


def log(records: list[dict]) -> list[tuple]:
    """(key, value, timestamp) as a reader of __consumer_offsets gets them."""
    return [encode_record({k: v for k, v in r.items() if k != "ts"}) + (r["ts"],) for r in records]


def track(events: list[dict], until: int | None = None) -> list[dict]:
    """The events through fresh consumer models, one per group as the tracker keeps its state (the feed emits a
    group's events in its order; two groups' events may interleave otherwise); then, with ``until``, each group's
    clock runs to that time (its timers fire)."""
    models: dict[str, ConsumerGroupCoordinator] = {}
    outputs = []
    for raw in events:
        event, error = parse_event(raw)  # what the job does with every record of the events topic
        assert error is None, error
        model = models.setdefault(
            event["group_id"], ConsumerGroupCoordinator(ConsumerGroupConfig.from_properties(CONSUMER_OBSERVER_SETTINGS))
        )
        outputs += model.handle(event)
    for model in models.values() if until is not None else ():
        outputs += model.advance(until)
    return outputs


def same_records(a: list[dict], b: list[dict]) -> bool:
    return [(normalise(r), r["ts"]) for r in a] == [(normalise(r), r["ts"]) for r in b]


def lifecycle(outputs: list[dict]) -> list[tuple]:
    return [
        (o["ts"] - START, o["type"], o["member_id"], o.get("reason"))
        for o in outputs
        if o["type"] in ("member_joined", "member_left", "member_expired", "member_replaced")
    ]


def model_view(outputs: list[dict], kinds=("assignment", "target_assignment")) -> list[dict]:
    return [o for o in outputs if o["type"] in kinds]


@pytest.fixture(scope="module")
def history():
    return scripted_history(GROUP)


def check_feed_reproduces(history, events: list[dict], feed: ClusterFeed) -> None:
    broker = broker_records(history)
    outputs = track(events)
    assert feed.consumer.counts["unexplained records"] == 0
    assert feed.consumer.counts["consumer group records"] == len(broker)
    # The model fed the feed's events writes the broker's records, in its order, at its times.
    assert same_records([o for o in outputs if is_consumer_group_record(o)], broker)
    # So every view of the model agrees: member epochs, states, assignments, pending revocations, targets.
    assert model_view(outputs) == model_view(history.outputs)
    # ... but who left and who was expired: the records are the same, and the feed says "leave".
    assert lifecycle(history.outputs) == [
        (1_000, "member_joined", "member-a", None),
        (3_000, "member_joined", "member-b", None),
        (13_000, "member_joined", "member-c", None),
        (23_000, "member_joined", "member-s1", None),
        (78_000, "member_expired", "member-b", "session timeout"),
        (93_000, "member_left", "member-c", "leave"),
        (103_000, "member_left", "member-s1", "static leave"),
        (106_000, "member_replaced", "member-s2", None),
    ]
    assert lifecycle(outputs) == [
        (1_000, "member_joined", "member-a", None),
        (3_000, "member_joined", "member-b", None),
        (13_000, "member_joined", "member-c", None),
        (23_000, "member_joined", "member-s1", None),
        (78_000, "member_left", "member-b", "leave"),
        (93_000, "member_left", "member-c", "leave"),
        (103_000, "member_left", "member-s1", "static leave"),
        (106_000, "member_replaced", "member-s2", None),
    ]


def check_timeline(history, records: list[dict]) -> None:
    """The timeline read from the records the model fed by the feed wrote is the history's."""
    timeline = consumer_group_timeline(records)
    assert timeline == consumer_group_timeline(broker_records(history))
    by = collections.defaultdict(list)
    for e in timeline:
        by[e["type"]].append(e)
    assert [e["group_epoch"] for e in by["group_epoch"]] == [1, 2, 3, 4, 5, 6, 7]
    assert [(e["ts"] - START, e["member_id"], e.get("replaces")) for e in by["member_joined"]] == [
        (1_000, "member-a", None),
        (3_000, "member-b", None),
        (13_000, "member-c", None),
        (23_000, "member-s1", None),
        (106_000, "member-s2", "member-s1"),
    ]
    assert [(e["ts"] - START, e["member_id"]) for e in by["member_left"]] == [
        (78_000, "member-b"),
        (93_000, "member-c"),
        (106_000, "member-s1"),
    ]
    # member-a takes 3 s to give partitions up, the others answer on their next heartbeat (1 s).
    assert [(e["member_id"], e["partitions"], e["started_ts"] - START, e["latency_ms"]) for e in by["revocation"]] == [
        ("member-a", [["orders", 3], ["orders", 4], ["orders", 5]], 4_000, 3_000),
        ("member-b", [["orders", 5]], 14_000, 1_000),
        ("member-a", [["orders", 2]], 14_000, 3_000),
        ("member-c", [["orders", 5]], 24_000, 1_000),
    ]
    # A partition has no owner from the record that asked its member to revoke it (the member stops fetching it
    # then) or removed the member, to the one that gave it to the next (docs/figures.md): the revocations above
    # (3 s for member-a, 1 s for the others), then the partitions of the members removed (crashed, left) until the
    # next member's heartbeat; the group always had members.
    assert [(e["partition"], e["member_id"], e["unowned_ms"], e["no_members_ms"]) for e in by["partition_unowned"]] == [
        (["orders", 3], "member-b", 3_000, 0),
        (["orders", 4], "member-b", 3_000, 0),
        (["orders", 5], "member-b", 3_000, 0),
        (["orders", 5], "member-c", 1_000, 0),
        (["orders", 2], "member-c", 3_000, 0),
        (["orders", 5], "member-s1", 1_000, 0),
        (["orders", 3], "member-c", 1_000, 0),
        (["orders", 4], "member-s1", 1_000, 0),
        (["orders", 2], "member-a", 1_000, 0),
        (["orders", 3], "member-s1", 1_000, 0),
    ]
    # Target vs current: when member-c joined, its target was set at once and its current followed in steps.
    c = [
        (e["ts"] - START, e["member_epoch"], e["state"], e["assigned"], e["target"])
        for e in by["member_epoch"]
        if e["member_id"] == "member-c"
    ][:4]
    assert c == [
        (13_000, 3, 2, [], [["orders", 2], ["orders", 5]]),
        (14_000, 3, 2, [], [["orders", 2], ["orders", 5]]),
        (15_000, 3, 2, [["orders", 5]], [["orders", 2], ["orders", 5]]),
        (17_000, 3, 0, [["orders", 2], ["orders", 5]], [["orders", 2], ["orders", 5]]),
    ]
    # The topic grew to 8 partitions: a new epoch whose target spreads the two new ones.
    assert by["target_assignment"][-1]["assignment"] == {
        "member-a": [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 6]],
        "member-s2": [["orders", 3], ["orders", 4], ["orders", 5], ["orders", 7]],
    }


# ---------------------------------------------------------------- the scripted history, in memory
def test_feed_events_make_the_consumer_model_write_the_brokers_records(history):
    feed = ClusterFeed()
    events = list(events_from(log(broker_records(history)), feed))
    check_feed_reproduces(history, events, feed)
    check_timeline(history, [o for o in track(events) if is_consumer_group_record(o)])
    kinds = collections.Counter(e["type"] for e in events)
    assert kinds == {"consumer_heartbeat": 32, "topic_metadata": 2}  # of 342 heartbeats: those that wrote
    assert sum(1 for o in history.outputs if o["type"] == "consumer_heartbeat_response") == 342
    assert any("76 KIP-848 consumer-group records became 34" in line for line in summary(feed, len(events), "ev"))


def test_what_the_events_say_the_members_sent(history):
    events, _ = feed_events_of(history)
    hb = [e for e in events if e["type"] == "consumer_heartbeat"]
    joins = [(e["member_id"], e["instance_id"], e["subscribed_topic_names"]) for e in hb if e["member_epoch"] == 0]
    assert joins == [
        ("member-a", None, ["orders"]),
        ("member-b", None, ["orders"]),
        ("member-c", None, ["orders"]),
        ("member-s1", "static-1", ["orders"]),
        ("member-s2", "static-1", ["orders"]),
    ]
    assert [(e["ts"] - START, e["member_id"], e["member_epoch"]) for e in hb if e["member_epoch"] < 0] == [
        (78_000, "member-b", -1),
        (93_000, "member-c", -1),
        (103_000, "member-s1", -2),
    ]
    # member-a's revocation: it reported all its partitions, then (3 s later) only those it kept.
    topic_id = next(e["topic_id"] for e in events if e["type"] == "topic_metadata")
    a = [(e["ts"] - START, e["topic_partitions"]) for e in hb if e["member_id"] == "member-a" and e["member_epoch"] > 0]
    assert a[:2] == [
        (4_000, [{"topic_id": topic_id, "partitions": [0, 1, 2, 3, 4, 5]}]),
        (7_000, [{"topic_id": topic_id, "partitions": [0, 1, 2]}]),
    ]
    assert [(e["ts"] - START, e["partitions"]) for e in events if e["type"] == "topic_metadata"] == [
        (1_000, 6),
        (117_000, 8),
    ]


def feed_events_of(history):
    feed = ClusterFeed()
    return list(events_from(log(broker_records(history)), feed)), feed


def test_a_batch_is_held_until_it_is_complete(history):
    """A request's records are one batch, all stamped with the time of the write: the feed says which request
    wrote them once a record of another time comes (or the reader has caught up)."""
    pairs = log(broker_records(history))
    feed = ClusterFeed()
    assert [feed.events_for_bytes(*p) for p in pairs[:6]] == [[]] * 6  # member-a's join: 6 records at 1 s
    assert [e["type"] for e in feed.events_for_bytes(*pairs[6])] == ["topic_metadata", "consumer_heartbeat"]
    # Record by record, then a flush (the reader caught up): the same events as reading it all at once.
    one_by_one = [e for p in pairs[7:] for e in feed.events_for_bytes(*p)] + feed.flush()
    assert one_by_one == feed_events_of(history)[0][2:]
    caught_up = ClusterFeed()
    assert [caught_up.events_for_bytes(*p) for p in pairs[:6]] == [[]] * 6
    assert [e["type"] for e in caught_up.flush()] == ["topic_metadata", "consumer_heartbeat"]


# ---------------------------------------------------------------- on the broker
def publish(bootstrap: str, topic: str, records: list[dict]) -> None:
    """Records laid out as in __consumer_offsets (50 partitions, partition_for(group), Kafka's bytes), each with its
    log timestamp."""
    ensure_topics(bootstrap, {topic: 50})
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=10)
    for r in records:
        key_bytes, value = encode_record({k: v for k, v in r.items() if k != "ts"})
        producer.send(
            topic, key=key_bytes, value=value, partition=partition_for(r["group_id"]), timestamp_ms=r.get("ts")
        )
    producer.flush()
    producer.close()


@pytest.mark.kafka
def test_cluster_feed_reads_consumer_group_records_from_the_broker(kafka_bootstrap, topic_name, history):
    topic = f"{topic_name}-consumer-offsets"
    publish(kafka_bootstrap, topic, broker_records(history))
    triples = list(read_offsets_topic(kafka_bootstrap, topic, timestamps=True))
    assert [t for _, _, t in triples] == [r["ts"] for r in broker_records(history)]  # the broker kept the times
    feed = ClusterFeed()
    events = list(events_from(triples, feed))
    check_feed_reproduces(history, events, feed)
    check_timeline(history, [o for o in track(events) if is_consumer_group_record(o)])


@pytest.mark.kafka
def test_the_cluster_feed_command_publishes_the_consumer_groups_events(kafka_bootstrap, topic_name, history, capsys):
    from streaming.cli import main as cli
    from tests.broker_history import read_feed

    topic, events_topic = f"{topic_name}-consumer-offsets", f"{topic_name}-events"
    publish(kafka_bootstrap, topic, broker_records(history))
    ensure_topics(kafka_bootstrap, {events_topic: 4})
    assert (
        cli.main(
            ["cluster-feed", "--bootstrap", kafka_bootstrap, "--offsets-topic", topic, "--events-topic", events_topic]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "76 KIP-848 consumer-group records became 34" in err
    # tracker.expire.members=false holds for the consumer model too (routing.Configs): no session timeout to set
    assert (
        "run the tracker with --coordinator-conf tracker.adopt.unknown.members=true --coordinator-conf "
        "tracker.expire.members=false\n"
        in err
        and "session.timeout" not in err
    )
    assert read_feed(kafka_bootstrap, events_topic, {}) == feed_events_of(history)[0]  # one group: one partition


@pytest.mark.kafka
def test_a_mixed_classic_and_consumer_feed(kafka_bootstrap, topic_name, history):
    """Classic groups (the simulator's, GroupMetadata and OffsetCommit records) and the consumer-protocol group in one
    log: each kind becomes its own events, and each model reproduces its groups."""
    from tests.feeds.test_cluster_feed import simulated_history, timeline

    classic_records, classic_outputs, classic_broker = simulated_history()
    consumer_records = broker_records(history)
    merged = sorted(
        classic_records + consumer_records,  # one log, in time order
        key=lambda r: r.get("ts") or r.get("commit_timestamp") or r.get("current_state_timestamp"),
    )
    topic = f"{topic_name}-consumer-offsets"
    publish(kafka_bootstrap, topic, merged)
    feed = ClusterFeed()
    events = list(events_from(read_offsets_topic(kafka_bootstrap, topic, timestamps=True), feed))
    consumer_events = [e for e in events if e["group_id"] == GROUP]
    classic_events = [e for e in events if e["group_id"] != GROUP]
    assert {e["type"] for e in consumer_events} == {"consumer_heartbeat", "topic_metadata"}
    assert "consumer_heartbeat" not in {e["type"] for e in classic_events}

    check_feed_reproduces(history, consumer_events, feed)
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    seen = []
    for raw in classic_events:
        event, error = parse_event(raw)
        assert error is None, error
        seen += tracker.handle(event)
    assert timeline(seen) == timeline(classic_outputs) and len(timeline(seen)) == 3
    for group_id in classic_broker.group_ids():
        assert tracker.fetch_offsets(group_id) == classic_broker.fetch_offsets(group_id)


# ---------------------------------------------------------------- records written by hand, as a broker lays them out
def join_batch() -> list[tuple[bytes, bytes]]:
    """Member m-1 joins grp subscribed to orders (3 partitions): Kafka's six records, partitions in hash-set order."""
    orders = [ORDERS.bytes + carr([i32(2), i32(0), i32(1)]) + NO_TAGS]
    return [
        (
            key(5, "grp", "m-1"),
            i16(0)
            + cstr(None)
            + cstr("rack-a")
            + cstr("app")
            + cstr("/10.0.0.7")
            + carr([cstr("orders")])
            + cstr(None)
            + i32(45_000)
            + cstr(None)
            + NO_TAGS,
        ),
        (key(4, "grp"), i16(0) + carr([ORDERS.bytes + cstr("orders") + i32(3) + carr([]) + NO_TAGS]) + NO_TAGS),
        (key(3, "grp"), i16(0) + i32(1) + NO_TAGS),
        (key(7, "grp", "m-1"), i16(0) + carr(orders) + NO_TAGS),
        (key(6, "grp"), i16(0) + i32(1) + NO_TAGS),
        (key(8, "grp", "m-1"), i16(0) + i32(1) + i32(0) + i8(0) + carr(orders) + carr([]) + NO_TAGS),
    ]


def test_a_join_written_by_hand_becomes_the_members_first_heartbeat():
    feed = ClusterFeed()
    events = list(events_from([(k, v, START) for k, v in join_batch()], feed))
    assert events == [
        {
            "type": "topic_metadata",
            "group_id": "grp",
            "ts": START,
            "topic": "orders",
            "partitions": 3,
            "topic_id": ORDERS_ID,
        },
        {
            "type": "consumer_heartbeat",
            "group_id": "grp",
            "ts": START,
            "member_id": "m-1",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": "rack-a",
            "rebalance_timeout_ms": 45_000,
            "subscribed_topic_names": ["orders"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
            "client_id": "app",
            "client_host": "/10.0.0.7",
        },
    ]
    assert feed.consumer.counts["unexplained records"] == 0


def test_a_leave_and_a_deletion_written_by_hand():
    leave = [
        (key(8, "grp", "m-1"), None),
        (key(7, "grp", "m-1"), None),
        (key(5, "grp", "m-1"), None),
        (key(4, "grp"), i16(0) + carr([]) + NO_TAGS),
        (key(3, "grp"), i16(0) + i32(2) + NO_TAGS),
    ]
    delete = [(key(6, "grp"), None), (key(4, "grp"), None), (key(3, "grp"), None)]
    log_ = (
        [(k, v, START) for k, v in join_batch()]
        + [(k, v, START + 5_000) for k, v in leave]
        + [(k, v, START + 9_000) for k, v in delete]
    )
    feed = ClusterFeed()
    events = list(events_from(log_, feed))
    assert [(e["type"], e["ts"] - START, e.get("member_epoch")) for e in events] == [
        ("topic_metadata", 0, None),
        ("consumer_heartbeat", 0, 0),
        ("consumer_heartbeat", 5_000, -1),
        ("delete_group", 9_000, None),
    ]
    assert feed.consumer.counts["unexplained records"] == 0
    outputs = track(events)
    assert [o["type"] for o in outputs if o["type"] in ("member_joined", "member_left", "delete_group_response")] == [
        "member_joined",
        "member_left",
        "delete_group_response",
    ]
    assert [(normalise(o), o["ts"]) for o in outputs if is_consumer_group_record(o)] == [
        (normalise(decode_record(k, v)), ts) for k, v, ts in log_
    ]


def test_target_records_in_another_order_and_newer_fields_are_still_explained():
    """Kafka writes the members' targets from a hash map and partitions from hash sets, and a newer broker adds
    tagged fields (metadataHash, assignmentTimestamp) the model does not write: none of it changes what a batch
    says."""
    head = [(k, v, START) for k, v in join_batch()]
    model = ConsumerGroupCoordinator(ConsumerGroupConfig.from_properties(CONSUMER_OBSERVER_SETTINGS))
    for e in events_from(head):
        model.handle(parse_event(e)[0])
    model.handle(
        parse_event({"type": "topic_metadata", "topic": "audit", "partitions": 1, "topic_id": AUDIT_ID, "ts": START})[0]
    )
    out = model.handle(
        parse_event(
            {
                "type": "consumer_heartbeat",
                "group_id": "grp",
                "ts": START + 1_000,
                "member_id": "m-2",
                "member_epoch": 0,
                "rebalance_timeout_ms": 45_000,
                "subscribed_topic_names": ["orders", "audit"],
                "topic_partitions": [],
                "client_id": "app",
                "client_host": "/10.0.0.8",
            }
        )[0]
    )
    written = [o for o in out if is_consumer_group_record(o)]
    targets = [r for r in written if r["type"] == "consumer_group_target_assignment_member"]
    assert [r["member_id"] for r in targets] == ["m-1", "m-2"]
    i = written.index(targets[0])
    broker = written[:i] + targets[::-1] + written[i + 2 :]
    for n, r in enumerate(broker):
        if r["type"] == "consumer_group_metadata":
            broker[n] = {**r, "metadataHash": 12345, "creationTimeMs": START}
        elif r["type"] == "consumer_group_target_assignment_metadata":
            broker[n] = {**r, "assignmentTimestamp": START + 1_000}
        elif r["type"] in ("consumer_group_target_assignment_member", "consumer_group_current_member_assignment"):
            field = "topicPartitions" if "topicPartitions" in r else "assignedPartitions"
            broker[n] = {**r, field: [{**tp, "partitions": tp["partitions"][::-1]} for tp in r[field][::-1]]}
    batch = [encode_record({k: v for k, v in r.items() if k != "ts"}) for r in broker]
    assert batch != [encode_record({k: v for k, v in r.items() if k != "ts"}) for r in written]
    feed = ClusterFeed()
    events = list(events_from(head + [(k, v, START + 1_000) for k, v in batch], feed))
    assert [(e["type"], e.get("member_id"), e.get("topic")) for e in events] == [
        ("topic_metadata", None, "orders"),
        ("consumer_heartbeat", "m-1", None),
        ("topic_metadata", None, "audit"),
        ("consumer_heartbeat", "m-2", None),
    ]
    assert feed.consumer.counts["unexplained records"] == 0


def test_records_no_request_explains_are_counted_and_applied():
    """A current assignment for a member the group never had: no request writes it. The feed counts it, applies it
    to its shadow as Kafka's loader would, and goes on with the next batch."""
    stray = (key(8, "grp", "ghost"), i16(0) + i32(7) + i32(6) + i8(0) + carr([]) + carr([]) + NO_TAGS)
    feed = ClusterFeed()
    events = list(events_from([(k, v, START) for k, v in join_batch()] + [stray + (START + 1,)], feed))
    assert [e["type"] for e in events] == ["topic_metadata", "consumer_heartbeat"]
    assert feed.consumer.counts["unexplained records"] == 1
    assert any("1 records no request explains" in line for line in summary(feed, len(events), "ev"))
    assert "ghost" in feed.consumer.shadows["grp"].groups["grp"].members


def test_a_static_member_restart_written_by_the_model_is_told_from_a_leave(history):
    """The old id's three tombstones start both a leave and a static restart; what follows decides."""
    events, _ = feed_events_of(history)
    at = [e for e in events if e["ts"] - START == 106_000]
    assert [(e["member_id"], e["member_epoch"], e["instance_id"]) for e in at] == [("member-s2", 0, "static-1")]


def test_a_static_member_away_past_its_session_is_told_as_expired():
    """A static member's temporary leave (epoch -2), then Kafka's session timer: the removal writes what a leave
    writes, but the member sends nothing after its -2, so the feed tells the broker's timer (``session_expired``)
    and the tracker reports a session expiry at the record's time. Then the instance joins again: a new member."""
    broker = ConsumerGroupCoordinator(ConsumerGroupConfig())  # Kafka's timers: a 45 s session

    def hb(ts: int, member_id: str, epoch: int, **fields) -> list[dict]:
        event = {"type": "consumer_heartbeat", "group_id": GROUP, "ts": ts, "member_id": member_id}
        parsed, error = parse_event({**event, "member_epoch": epoch, **fields})
        assert error is None, error
        return broker.handle(parsed)

    first = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["orders"], "topic_partitions": []}
    outputs = broker.handle(
        parse_event(
            {
                "type": "topic_metadata",
                "group_id": GROUP,
                "ts": START,
                "topic": "orders",
                "partitions": 4,
                "topic_id": ORDERS_ID,
            }
        )[0]
    )
    outputs += hb(START, "member-a", 0, **first)
    outputs += hb(START + 1000, "member-s1", 0, instance_id="static-1", **first)

    def epoch(member_id: str) -> int:
        return broker.groups[GROUP].members[member_id].member_epoch

    outputs += hb(START + 2000, "member-s1", epoch("member-s1"), instance_id="static-1")  # no record
    outputs += hb(START + 3000, "member-s1", -2, instance_id="static-1")
    outputs += hb(START + 40_000, "member-a", epoch("member-a"))  # member-a stays
    outputs += broker.advance(START + 2000 + 45_000)  # s1's session, from its last heartbeat
    outputs += hb(START + 50_000, "member-s2", 0, instance_id="static-1", **first)
    assert [o["ts"] - START for o in outputs if o["type"] == "member_expired"] == [47_000]
    feed = ClusterFeed()
    events = list(events_from(log(broker_records(SimpleNamespace(outputs=outputs))), feed))
    assert feed.consumer.counts["unexplained records"] == 0
    told = [(e["type"], e.get("member_epoch"), e["ts"] - START) for e in events if e.get("member_id") == "member-s1"]
    assert told[-2:] == [("consumer_heartbeat", -2, 3000), ("session_expired", None, 47_000)]
    tracked = track(events)
    assert same_records(
        [o for o in tracked if is_consumer_group_record(o)], broker_records(SimpleNamespace(outputs=outputs))
    )
    assert [(o["member_id"], o["reason"], o["ts"] - START) for o in tracked if o["type"] == "member_expired"] == [
        ("member-s1", "session timeout", 47_000)
    ]
    assert not any(o["type"] == "member_replaced" for o in tracked)


# ---------------------------------------------------------------- seeded churn
@pytest.mark.parametrize("seed", [4, 6, 7, 8])  # seeds whose histories have rebalance-timeout fences
def test_seeded_churn_on_two_groups_is_reproduced(seed):
    """Members join (some static, some slow to revoke, some slower than their rebalance timeout), crash, leave and
    restart on two groups while topics grow: every record is explained, the models agree step by step, and only
    session expiries read as leaves."""
    history = random_history(seed)
    broker = broker_records(history)
    feed = ClusterFeed()
    events = list(events_from(log(broker), feed))
    assert feed.consumer.counts["unexplained records"] == 0
    assert {e["type"] for e in events} <= {"consumer_heartbeat", "topic_metadata"}
    # A member fenced by its rebalance timeout is the model's own timer: it fires when the group's clock passes it.
    outputs = track(events, until=history.now)
    expired = [o for o in outputs if o["type"] == "member_expired"]
    assert expired and {o["reason"] for o in expired} == {"rebalance timeout"}
    for group_id in sorted({e["group_id"] for e in events}):
        mine = [o for o in outputs if o.get("group_id") == group_id]
        theirs = [o for o in history.outputs if o.get("group_id") == group_id]
        assert same_records(
            [o for o in mine if is_consumer_group_record(o)], [o for o in theirs if is_consumer_group_record(o)]
        )
        # Two requests in the same millisecond whose records one request could write are told as that one: the
        # model's outputs of that millisecond come in another order.
        assert same_time_unordered(model_view(mine)) == same_time_unordered(model_view(theirs))
        # Removals: a session expiry reads as a leave (same records); rebalance-timeout fences stay expiries.
        assert [r[:3] for r in removals(mine)] == [
            (ts, m, "member_left" if reason == "session timeout" else kind) for ts, m, kind, reason in removals(theirs)
        ]
        assert consumer_group_timeline(o for o in mine if is_consumer_group_record(o)) == consumer_group_timeline(
            r for r in broker if r["group_id"] == group_id
        )


def removals(outputs: list[dict]) -> list[tuple]:
    return [
        (o["ts"], o["member_id"], o["type"], o.get("reason"))
        for o in outputs
        if o["type"] in ("member_left", "member_expired") and o.get("reason") != "static leave"
    ]


def same_time_unordered(outputs: list[dict]) -> list[dict]:
    return sorted(outputs, key=lambda o: (o["ts"], o["type"], o.get("member_id") or ""))


# ---------------------------------------------------------------- offset commits of consumer-protocol groups
def offsets_view(outputs: list[dict]) -> list[tuple]:
    return [
        (o["ts"], o["group_id"], o["topic"], o["partition"], o.get("offset"), o.get("commit_timestamp"), o["tombstone"])
        for o in outputs
        if o["type"] == "offset_commit"
    ]


def test_a_consumer_groups_commits_become_commits_the_model_takes():
    """OffsetCommit records carry no member id: the feed names the partition's owner at its epoch (the shadow's),
    the epoch the broker checked. Fed to the model, every commit is taken and the model writes the broker's offset
    records, interleaved with the group's own records as in the log -- a member committing before it revokes too."""
    history = scripted_history(GROUP, commit_interval_ms=5_000)
    log_records = [o for o in history.outputs if is_consumer_group_record(o) or o["type"] == "offset_commit"]
    feed = ClusterFeed()
    events = list(events_from(log(log_records), feed))
    assert feed.consumer.counts["unexplained records"] == 0
    commits = [e for e in events if e["type"] == "commit"]
    assert len(commits) == sum(o["type"] == "offset_commit" for o in log_records) > 50
    assert feed.consumer.counts["commits by the partition's owner"] == len(commits)
    assert "commits the model refuses" not in feed.consumer.counts
    outputs = track(events)
    assert {o["error"] for o in outputs if o["type"] == "commit_response"} == {"NONE"}
    assert offsets_view(outputs) == offsets_view(log_records)
    assert same_records([o for o in outputs if is_consumer_group_record(o)], broker_records(history))

    # Each commit (one a record, so one a partition) names the member that sent it and the epoch it sent.
    def per_partition(es):
        return sorted(
            (e["ts"], e["member_id"], e["generation"], o["topic"], o["partition"]) for e in es for o in e["offsets"]
        )

    assert per_partition(commits) == per_partition(e for e in history.events if e["type"] == "commit")
    assert any("commit events: " in line for line in summary(feed, len(events), "ev"))


def test_an_admin_commit_and_a_deletion_of_a_consumer_group():
    """After its members left, an Empty consumer group takes an admin commit (epoch -1) and is deleted with
    DeleteGroups: the offsets' tombstones are no events (the model writes its own), the group's become delete_group."""
    h = History()
    h.topic("orders", 2)
    h.now += SECOND
    a = Client(GROUP, "member-a", ["orders"])
    h.join(a)
    h.run_until(h.now + 3 * SECOND)
    h.leave(a)
    h.now += SECOND
    h.send(
        type="commit",
        group_id=GROUP,
        member_id="",
        generation=-1,
        offsets=[{"topic": "orders", "partition": 1, "offset": 99}],
    )
    h.now += SECOND
    h.send(type="delete_group", group_id=GROUP)
    log_records = [o for o in h.outputs if is_consumer_group_record(o) or o["type"] == "offset_commit"]
    assert [o["type"] for o in log_records].count("offset_commit") == 2  # the commit and its tombstone
    feed = ClusterFeed()
    events = list(events_from(log(log_records), feed))
    (commit,) = [e for e in events if e["type"] == "commit"]
    assert (commit["member_id"], commit["generation"]) == ("", -1) and feed.consumer.counts["admin commits"] == 1
    assert [e["type"] for e in events][-2:] == ["commit", "delete_group"]
    outputs = track(events)
    assert offsets_view(outputs) == offsets_view(log_records)
    assert same_records(
        [o for o in outputs if is_consumer_group_record(o)], [o for o in h.outputs if is_consumer_group_record(o)]
    )


def test_commits_of_a_classic_group_are_still_the_classic_feeds():
    feed = ClusterFeed()
    record = {
        "type": "offset_commit",
        "group_id": "simple",
        "topic": "t",
        "partition": 0,
        "offset": 5,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": START,
        "expire_timestamp": -1,
    }
    (event,) = feed.events_for(record)
    assert (event["member_id"], event["generation"]) == ("", -1) and not feed.consumer.shadows


# ---------------------------------------------------------------- Kafka 4.3+: targets at most once per interval
DEFERRED = {**CONSUMER_OBSERVER_SETTINGS, "initial.group.epoch": 1, "group.consumer.assignment.interval.ms": 1000}


def deferred_feed(props=DEFERRED) -> ClusterFeed:
    return ClusterFeed(ConsumerGroupFeed(ConsumerGroupConfig.from_properties(props)))


def track_with(events: list[dict], props: dict, until: int | None = None) -> list[dict]:
    """``track``, with the tracker's models set up as ``props`` say."""
    models: dict[str, ConsumerGroupCoordinator] = {}
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        model = models.setdefault(
            event["group_id"], ConsumerGroupCoordinator(ConsumerGroupConfig.from_properties(props))
        )
        outputs += model.handle(event)
    for model in models.values() if until is not None else ():
        outputs += model.advance(until)
    return outputs


@pytest.mark.parametrize("seed", [4, 7])
@pytest.mark.parametrize("interval_ms", [2000, 3000])
def test_targets_deferred_by_the_assignment_interval_are_explained(seed, interval_ms):
    """A broker with group.consumer.assignment.interval.ms (Kafka 4.3+; 1000 by default, here longer than the
    members' heartbeat of a second, so that requests fall within it): a join, a leave or a new subscription within
    the interval of the last target writes no target, a later heartbeat of any member does. The feed told the
    broker's interval explains every record, and the tracker's models fed its events write the broker's records;
    told there is none (Kafka up to 4.2), it cannot."""
    props = {**DEFERRED, "group.consumer.assignment.interval.ms": interval_ms}
    broker_config = ConsumerGroupConfig(initial_group_epoch=1, group_consumer_assignment_interval_ms=interval_ms)
    history = random_history(seed, config=broker_config)
    broker = broker_records(history)

    feed = deferred_feed(props)
    events = list(events_from(log(broker), feed))
    assert feed.consumer.counts["unexplained records"] == 0
    outputs = track_with(events, props, until=history.now)
    for group_id in sorted({e["group_id"] for e in events}):
        mine = [o for o in outputs if o.get("group_id") == group_id and is_consumer_group_record(o)]
        theirs = [r for r in broker if r["group_id"] == group_id]
        assert same_records(mine, theirs)

    synchronous = deferred_feed({**props, "group.consumer.assignment.interval.ms": 0})
    list(events_from(log(broker), synchronous))
    assert synchronous.consumer.counts["unexplained records"] > 0


def test_the_brokers_clock_for_a_request_is_read_before_it_stamps_the_batch():
    """The broker decides on a target with its clock when it handles the request, writes that time in the target's
    assignmentTimestamp, and stamps the batch a little later. Here m2 joins 1 ms before the interval runs out (no
    target) in a batch stamped 2 ms after it; m2's next heartbeat computes the target at T+1003, stamped T+1006; m3
    joins (no target), and m1's heartbeat exactly one interval after T+1003 computes the next. The feed gives each
    request the time the broker decided at, so the model decides as it did."""
    T = START
    broker = ConsumerGroupCoordinator(
        ConsumerGroupConfig(initial_group_epoch=1, group_consumer_assignment_interval_ms=1000)
    )
    written: list[dict] = []
    stamp: dict[int, int] = {}  # the time the broker handled each request -> the time it stamped its batch

    def send(at: int, stamped: int, **event) -> None:
        parsed, error = parse_event({"ts": at, "group_id": "grp", **event})
        assert error is None, error
        stamp[at] = stamped
        written.extend(o for o in broker.handle(parsed) if is_consumer_group_record(o))

    def join(at, stamped, member_id):
        send(
            at,
            stamped,
            type="consumer_heartbeat",
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=45_000,
            subscribed_topic_names=["orders"],
            topic_partitions=[],
            client_id="app",
            client_host="/10.0.0.8",
        )

    def heartbeat(at, stamped, member_id, epoch, owned):
        send(
            at,
            stamped,
            type="consumer_heartbeat",
            member_id=member_id,
            member_epoch=epoch,
            topic_partitions=[{"topic_id": ORDERS_ID, "partitions": owned}],
            client_id="app",
            client_host="/10.0.0.8",
        )

    topic, _ = parse_event(
        {"type": "topic_metadata", "topic": "orders", "partitions": 4, "topic_id": ORDERS_ID, "ts": T}
    )
    broker.handle(topic)
    join(T, T + 3, "m1")
    join(T + 999, T + 1002, "m2")
    heartbeat(T + 1003, T + 1006, "m2", 2, [])
    join(T + 1500, T + 1501, "m3")
    heartbeat(T + 2003, T + 2005, "m1", 2, [0, 1, 2, 3])
    stamps = [r["assignmentTimestamp"] for r in written if r["type"] == "consumer_group_target_assignment_metadata"]
    assert stamps == [T, T + 1003, T + 2003]
    log_ = [encode_record({k: v for k, v in r.items() if k != "ts"}) + (stamp[r["ts"]],) for r in written]

    feed = deferred_feed()
    events = list(events_from(log_, feed))
    assert feed.consumer.counts["unexplained records"] == 0
    assert [(e["member_id"], e["ts"] - T) for e in events if e["type"] == "consumer_heartbeat"] == [
        ("m1", 0),  # its target's time (the first ever: computed at once), not its batch's 3
        ("m2", 999),  # not its batch's 1002: the broker wrote no target, so its clock read before 1000
        ("m2", 1003),  # its target's time, not its batch's 1006
        ("m3", 1501),
        ("m1", 2003),
    ]
    mine = [o for o in track_with(events, DEFERRED) if is_consumer_group_record(o)]
    assert [normalise(r) for r in mine] == [normalise(decode_record(k, v)) for k, v, _ in log_]


class AskedLate:
    """The cluster's topics as ``BrokerTopics`` keeps them: the answer of the last time it asked, which knew only
    ``orders``; ``refresh`` asks again."""

    def __init__(self, cluster):
        self.cluster, self.known = cluster, {"orders": cluster["orders"]}

    def __call__(self, name):
        return self.known.get(name)

    def refresh(self, since_ms=None):
        changed, self.known = self.known != self.cluster, dict(self.cluster)
        return changed


def test_a_subscription_to_a_new_topic_within_the_interval_brings_the_topic_first():
    """Kafka 4.1+ writes no subscription metadata: the feed takes topics from the cluster. A member subscribing to
    a topic within the interval of the last target bumps the group epoch and writes no target, which reads the same
    whether the topic was there or not; the broker knew it (the cluster has it), so the feed emits it first, and
    the target the next heartbeat computes gives the member its partitions, as the broker's did. A topic the
    feed's last answer from the cluster did not have yet (created since) is asked for before the batch is
    explained."""
    T = START
    broker = ConsumerGroupCoordinator(
        ConsumerGroupConfig(initial_group_epoch=1, group_consumer_assignment_interval_ms=1000)
    )
    written: list[dict] = []

    def send(**event) -> None:
        parsed, error = parse_event({"group_id": "grp", "client_id": "app", "client_host": "/10.0.0.8", **event})
        assert error is None, error
        written.extend(o for o in broker.handle(parsed) if is_consumer_group_record(o))

    def topic(name, topic_id, ts):
        broker.handle(
            parse_event({"type": "topic_metadata", "topic": name, "partitions": 2, "topic_id": topic_id, "ts": ts})[0]
        )

    hb = {"type": "consumer_heartbeat", "member_id": "m1"}
    topic("orders", ORDERS_ID, T)
    send(
        **hb, ts=T, member_epoch=0, rebalance_timeout_ms=45_000, subscribed_topic_names=["orders"], topic_partitions=[]
    )
    topic("audit", AUDIT_ID, T + 400)
    owned = [{"topic_id": ORDERS_ID, "partitions": [0, 1]}]
    send(**hb, ts=T + 500, member_epoch=2, subscribed_topic_names=["orders", "audit"], topic_partitions=owned)
    send(**hb, ts=T + 1500, member_epoch=2, topic_partitions=owned)
    log_ = [  # as Kafka 4.1+ writes them: no subscription metadata
        encode_record({k: v for k, v in r.items() if k != "ts"}) + (r["ts"],)
        for r in written
        if r["type"] != "consumer_group_partition_metadata"
    ]
    cluster = {"orders": (ORDERS_ID, 2), "audit": (AUDIT_ID, 2)}
    for topics in (cluster.get, AskedLate(cluster)):
        feed = ClusterFeed(ConsumerGroupFeed(ConsumerGroupConfig.from_properties(DEFERRED), topics=topics))
        events = list(events_from(log_, feed))
        assert feed.consumer.counts["unexplained records"] == 0
        assert [(e["type"], e.get("topic") or e.get("member_id"), e["ts"] - T) for e in events] == [
            ("topic_metadata", "orders", 0),
            ("consumer_heartbeat", "m1", 0),
            ("topic_metadata", "audit", 500),
            ("consumer_heartbeat", "m1", 500),
            ("consumer_heartbeat", "m1", 1500),
        ]
    targets = [r for r in written if r["type"] == "consumer_group_target_assignment_member"]
    assert {tp["topicId"] for tp in targets[-1]["topicPartitions"]} == {ORDERS_ID, AUDIT_ID}
