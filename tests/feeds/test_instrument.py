"""Live instrumentation with real kafka-python consumers on the broker: the feed reports what the broker really did
(member ids, generations, delivered assignments, commits, leaves), and the tracker fed only that feed ends up with
exactly the assignments the broker delivered."""

from __future__ import annotations

import collections
import json
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer.group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from offsets_store.codec import encode_assignment

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.instrument import commit_event, instrument, leave_events, sync_event
from streaming.feeds.partitioners import partition_for_key

FEED_PARTITIONS = 3


# ------------------------------------------------------------------ the translation, on real protocol objects
def _commit_pair():
    topic, part = (
        OffsetCommitRequest.OffsetCommitRequestTopic,
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition,
    )
    request = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=4,
        member_id="m1",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            topic(
                name="t",
                partitions=[
                    part(partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""),
                    part(partition_index=1, committed_offset=9, committed_leader_epoch=2, committed_metadata="m"),
                ],
            )
        ],
    )
    rtopic = OffsetCommitResponse.OffsetCommitResponseTopic
    rpart = rtopic.OffsetCommitResponsePartition
    return request, rtopic, rpart


def test_commit_event_keeps_only_what_the_broker_accepted():
    request, rtopic, rpart = _commit_pair()
    response = OffsetCommitResponse(
        topics=[
            rtopic(
                name="t", partitions=[rpart(partition_index=0, error_code=22), rpart(partition_index=1, error_code=0)]
            )
        ]
    )  # 22: ILLEGAL_GENERATION
    event = commit_event(request, response, 1_000)
    assert event["member_id"] == "m1" and event["generation"] == 4 and event["retention_ms"] == -1
    assert event["offsets"] == [{"topic": "t", "partition": 1, "offset": 9, "leader_epoch": 2, "metadata": "m"}]
    refused = OffsetCommitResponse(
        topics=[
            rtopic(
                name="t", partitions=[rpart(partition_index=0, error_code=22), rpart(partition_index=1, error_code=22)]
            )
        ]
    )
    assert commit_event(request, refused, 1_000) is None
    assert parse_event(json.dumps(event).encode())[1] is None


def test_sync_event_decodes_leader_assignments_and_the_delivered_partitions():
    mine = encode_assignment({"partitions": [["t", 3], ["t", 1]]})
    theirs = encode_assignment({"partitions": [["t", 0], ["u", 2]]})
    request = SyncGroupRequest(
        group_id="g",
        generation_id=7,
        member_id="a",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="a", assignment=mine),
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="b", assignment=theirs),
        ],
    )
    event = sync_event(request, SyncGroupResponse(error_code=0, assignment=mine), 5)
    assert event["generation"] == 7 and event["protocol_name"] == "range"
    assert event["assignments"] == {"a": [["t", 1], ["t", 3]], "b": [["t", 0], ["u", 2]]}
    assert event["assigned"] == [["t", 1], ["t", 3]]
    follower = SyncGroupRequest(
        group_id="g",
        generation_id=7,
        member_id="b",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )
    event = sync_event(follower, SyncGroupResponse(error_code=0, assignment=b""), 5)
    assert "assignments" not in event and event["assigned"] == []


def test_leave_events_only_for_the_members_the_broker_removed():
    ok = LeaveGroupResponse(error_code=0, members=[])
    assert [e["member_id"] for e in leave_events(LeaveGroupRequest(group_id="g", member_id="m0"), ok, 1)] == ["m0"]
    # Refused: a consumer back from a long pause leaves a group that dropped it (25: UNKNOWN_MEMBER_ID).
    assert leave_events(LeaveGroupRequest(group_id="g", member_id="m0"), LeaveGroupResponse(error_code=25), 1) == []
    batched = LeaveGroupRequest(
        group_id="g",
        members=[
            LeaveGroupRequest.MemberIdentity(member_id="a", group_instance_id="i-a", reason="bye"),
            LeaveGroupRequest.MemberIdentity(member_id="b", group_instance_id="i-b", reason=None),
            LeaveGroupRequest.MemberIdentity(member_id="c", group_instance_id=None, reason=None),
        ],
    )
    answer = LeaveGroupResponse(
        error_code=0,
        members=[
            LeaveGroupResponse.MemberResponse(member_id="a", group_instance_id="i-a", error_code=0),
            LeaveGroupResponse.MemberResponse(member_id="b", group_instance_id="i-b", error_code=0),
            LeaveGroupResponse.MemberResponse(member_id="c", group_instance_id=None, error_code=25),
        ],
    )
    events = leave_events(batched, answer, 1)
    assert [(e["member_id"], e["group_instance_id"], e["reason"]) for e in events] == [
        ("a", "i-a", "bye"),
        ("b", "i-b", ""),
    ]


# ------------------------------------------------------------------ real consumers on the broker


class Member(threading.Thread):
    """One consumer polling in its own thread (kafka-python consumers are not thread-safe)."""

    def __init__(self, bootstrap, topic, group, name, producer, feed_topic, client=None):
        super().__init__(daemon=True, name=name)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            **(client or {}),
            session_timeout_ms=3_000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RangePartitionAssignor],
        )
        instrument(self.consumer, producer, feed_topic, heartbeat_every_ms=1_000)
        self.stop_event = threading.Event()
        self.commit_offset: int | None = None  # set by the test: commit this offset on every owned partition
        self.use_async = False
        self.assigned: set = set()
        self.committed: dict = {}
        self.commit_generation = -1

    def run(self):
        while not self.stop_event.is_set():
            self.consumer.poll(timeout_ms=100)
            self.assigned = set(self.consumer.assignment())
            if self.commit_offset is not None and self.assigned:
                offsets = {tp: OffsetAndMetadata(self.commit_offset, "", -1) for tp in self.assigned}
                generation = self.consumer._coordinator._generation.generation_id
                if self.use_async:
                    done = threading.Event()
                    self.consumer.commit_async(offsets, callback=lambda *_, done=done: done.set())
                    while not done.is_set():
                        self.consumer.poll(timeout_ms=50)
                else:
                    self.consumer.commit(offsets)
                self.committed = {(tp.topic, tp.partition): self.commit_offset for tp in offsets}
                self.commit_generation, self.commit_offset = generation, None
        self.consumer.close()

    def snapshot(self) -> tuple[str, int, list]:
        generation = self.consumer._coordinator._generation
        return generation.member_id, generation.generation_id, sorted([tp.topic, tp.partition] for tp in self.assigned)


def wait_until(predicate, timeout_s=120, what=""):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def settled(members, partitions):
    sets = [m.assigned for m in members]
    return all(sets) and sum(len(s) for s in sets) == len(set().union(*sets)) == partitions


def stable_snapshots(members, partitions):
    """Each member's (member id, generation, partitions), once two looks a second apart agree."""
    while True:
        wait_until(lambda: settled(members, partitions), what=f"{len(members)} consumers sharing the partitions")
        before = [m.snapshot() for m in members]
        time.sleep(1.0)
        if [m.snapshot() for m in members] == before and settled(members, partitions):
            return {member_id: (generation, parts) for member_id, generation, parts in before}


@pytest.mark.kafka
def test_feed_reports_what_the_broker_did(group_broker, topic_name):
    """Three consumers in one process sharing one producer: the feed of a shared producer is ordered by send, so a
    follower's rejoin can be the first the tracker hears of a round."""
    kafka_bootstrap, client = group_broker.bootstrap, group_broker.client
    data_topic, feed_topic, group = topic_name, f"{topic_name}-feed", f"{topic_name}-group"
    group_broker.create_topics({data_topic: 6, feed_topic: FEED_PARTITIONS})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", **client)
    members = [Member(kafka_bootstrap, data_topic, group, f"c{i}", producer, feed_topic, client) for i in range(3)]
    try:
        for m in members:
            m.start()
        first = stable_snapshots(members, 6)
        members[0].commit_offset = 5
        members[1].commit_offset, members[1].use_async = 7, True
        wait_until(lambda: members[0].committed and members[1].committed, what="two commits")
        commits = {m.snapshot()[0]: (m.commit_generation, m.committed) for m in members[:2]}
        leaving = members.pop()
        leaving_id = leaving.snapshot()[0]
        leaving.stop_event.set()
        leaving.join(15)
        second = stable_snapshots(members, 6)
        assert all(len(parts) == 3 for _, parts in second.values())
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(15)
        producer.flush(30)
        producer.close()

    feed = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000, **client
    )
    tps = [TopicPartition(feed_topic, p) for p in range(FEED_PARTITIONS)]
    feed.assign(tps)
    feed.seek_to_beginning(*tps)
    records = list(feed)
    feed.close()

    # Keyed by group id with the default partitioner: all in one partition, so in order.
    assert {r.key for r in records} == {group.encode("utf-8")}
    assert {r.partition for r in records} == {partition_for_key(group.encode("utf-8"), FEED_PARTITIONS)}
    parsed = [parse_event(r.value) for r in sorted(records, key=lambda r: r.offset)]
    assert all(error is None for _, error in parsed), [e for e in parsed if e[1]]
    events = [e for e, _ in parsed]
    assert {"join", "sync", "heartbeat", "commit", "leave"} <= {e["type"] for e in events}

    # Real member ids only; per member, join and sync alternate: one join per generation it took part in.
    real_ids = set(first) | set(second)
    by_member = collections.defaultdict(list)
    for e in events:
        if e["type"] in ("join", "sync"):
            by_member[e["member_id"]].append(e)
    assert set(by_member) == real_ids
    for member_id, seq in by_member.items():
        # Every sync answers a join since the previous sync (a round may end without one: its SyncGroup was refused
        # because another member joined, or close() cut a rejoin short).
        types = "".join("j" if e["type"] == "join" else "s" for e in seq)
        assert types.startswith("j") and "ss" not in types, (member_id, types)
        generations = [e["generation"] for e in seq if e["type"] == "sync"]
        assert generations == sorted(generations), member_id  # a rejoin may be answered in the same generation
    joins = [e for e in events if e["type"] == "join"]
    assert {e["client_id"] for e in joins} == {"c0", "c1", "c2"}
    assert all(
        e["session_timeout_ms"] == 3_000
        and e["protocols"][0]["name"] == "range"
        and e["protocols"][0]["topics"] == [data_topic]
        for e in joins
    )

    # Delivered assignments are exactly what each consumer's assignment() showed, generation by generation, and
    # the leader's assignments for that generation say the same.
    syncs = {(e["member_id"], e["generation"]): e for e in events if e["type"] == "sync"}
    for snapshot in (first, second):
        for member_id, (generation, parts) in snapshot.items():
            assert syncs[(member_id, generation)]["assigned"] == parts
        (generation,) = {g for g, _ in snapshot.values()}
        leader = [e for (_, g), e in syncs.items() if g == generation and e.get("assignments")]
        assert len(leader) == 1
        assert {m: sorted(p) for m, p in leader[0]["assignments"].items()} == {
            m: parts for m, (_, parts) in snapshot.items()
        }

    # Commits carry the committed offsets, member and generation.
    for member_id, (generation, committed) in commits.items():
        mine = [e for e in events if e["type"] == "commit" and e["member_id"] == member_id]
        assert len(mine) == 1 and mine[0]["generation"] == generation
        assert {(o["topic"], o["partition"]): o["offset"] for o in mine[0]["offsets"]} == committed

    # Heartbeats are thinned to at most one per member per second.
    beats = collections.defaultdict(list)
    for e in events:
        if e["type"] == "heartbeat":
            beats[e["member_id"]].append(e["ts"])
    assert beats and all(b - a >= 1_000 for ts in beats.values() for a, b in zip(ts, ts[1:]))

    # Every member left on close, the one that left early first.
    leaves = [e["member_id"] for e in events if e["type"] == "leave"]
    assert sorted(leaves) == sorted(real_ids) and leaves[0] == leaving_id

    # The tracker, fed only this feed, has the broker's assignment at each stable point.
    tracker = GroupCoordinator(
        CoordinatorConfig(
            adopt_unknown_members=True, group_min_session_timeout_ms=1_000, group_initial_rebalance_delay_ms=0
        )
    )
    seen, final = [], None
    for e in events:
        if e["type"] == "leave" and e["member_id"] != leaving_id:
            break  # the remaining members closing is not our question
        for out in tracker.handle(e):
            if out["type"] == "rebalance" and out["group_id"] == group:
                seen.append({m: sorted(map(list, parts)) for m, parts in out["assignment"].items()})
        described = tracker.describe_group(group)
        if described["state"] == "Stable":
            final = {m["member_id"]: sorted(map(list, m["assignment"])) for m in described["members"]}
    assert {m: parts for m, (_, parts) in first.items()} in seen, seen
    assert final == {m: parts for m, (_, parts) in second.items()}
    assert {tp: o["offset"] for tp, o in tracker.fetch_offsets(group).items()} == {
        tp: off for _, committed in commits.values() for tp, off in committed.items()
    }
