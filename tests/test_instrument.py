"""Live instrumentation with real kafka-python consumers on the broker: the tracker, fed only the mirrored requests,
ends up with exactly the assignments the broker delivered."""
from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.instrument import GroupEventMirror
from streaming.run import ensure_topics

pytestmark = pytest.mark.kafka


class Member(threading.Thread):
    """One consumer polling in its own thread (kafka-python consumers are not thread-safe)."""

    def __init__(self, bootstrap, topic, group, name, mirror):
        super().__init__(daemon=True, name=name)
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                      session_timeout_ms=3_000, heartbeat_interval_ms=500,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      partition_assignment_strategy=[RangePartitionAssignor])
        mirror.attach(self.consumer)
        self.stop_event, self.commit_request = threading.Event(), threading.Event()
        self.assigned: set = set()
        self.committed: set = set()

    def run(self):
        while not self.stop_event.is_set():
            self.consumer.poll(timeout_ms=100)
            self.assigned = set(self.consumer.assignment())
            if self.commit_request.is_set() and self.assigned:
                self.consumer.commit({tp: OffsetAndMetadata(5, "", -1) for tp in self.assigned})
                self.committed = set(self.assigned)
                self.commit_request.clear()
        self.consumer.close()

    @property
    def member_id(self):
        return self.consumer._coordinator._generation.member_id


def wait_until(predicate, timeout_s=40, what=""):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def settled(members, partitions):
    sets = [m.assigned for m in members]
    union = set().union(*sets)
    return all(sets) and sum(len(s) for s in sets) == len(union) == partitions


def test_tracker_reproduces_what_real_consumers_received(kafka_bootstrap, topic_name):
    data_topic, feed_topic, group = topic_name, f"{topic_name}-feed", f"{topic_name}-group"
    ensure_topics(kafka_bootstrap, {data_topic: 6, feed_topic: 1})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    mirror = GroupEventMirror(producer, feed_topic)
    members = [Member(kafka_bootstrap, data_topic, group, f"c{i}", mirror) for i in range(3)]
    try:
        for m in members:
            m.start()
        wait_until(lambda: settled(members, 6), what="three consumers sharing six partitions")
        time.sleep(1.5)   # a few heartbeats, so the round is surely over everywhere
        first = {m.member_id: sorted(m.assigned) for m in members}
        members[0].commit_request.set()
        wait_until(lambda: members[0].committed, what="a commit")
        committed = members[0].committed
        leaving = members.pop()
        leaving.stop_event.set()
        leaving.join(15)
        wait_until(lambda: settled(members, 6) and all(len(m.assigned) == 3 for m in members),
                   what="two consumers after one left")
        time.sleep(1.5)
        second = {m.member_id: sorted(m.assigned) for m in members}
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(15)
        mirror.flush()
        producer.close()

    feed = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000)
    feed.assign([TopicPartition(feed_topic, 0)])
    feed.seek_to_beginning()
    events = [parse_event(r.value) for r in feed]
    feed.close()
    assert all(error is None for _, error in events), [e for e in events if e[1]]
    kinds = {e["type"] for e, _ in events}
    assert {"join", "sync", "heartbeat", "commit", "leave"} <= kinds

    tracker = GroupCoordinator(CoordinatorConfig(adopt_unknown_members=True, group_min_session_timeout_ms=1_000,
                                                 group_initial_rebalance_delay_ms=0))
    outputs = []
    # Stop right after the last recorded request: the remaining members closed later, which is not our question.
    cut = max(i for i, (e, _) in enumerate(events) if e["type"] == "leave" and e["member_id"] not in second)
    for e, _ in events[:cut + 1]:
        outputs += tracker.handle(e)
    rebalances = [o for o in outputs if o["type"] == "rebalance" and o["group_id"] == group]
    seen = [{m: sorted(TopicPartition(t, p) for t, p in parts) for m, parts in r["assignment"].items()}
            for r in rebalances]
    assert first in seen, f"tracker saw {seen}, consumers had {first}"
    for e, _ in events[cut + 1:]:
        outputs += tracker.handle(e)
        if tracker.describe_group(group)["state"] == "Stable" and len(tracker.describe_group(group)["members"]) == 2:
            break
    final = {m["member_id"]: sorted(TopicPartition(t, p) for t, p in m["assignment"])
             for m in tracker.describe_group(group)["members"]}
    assert final == second
    assert {tp: o["offset"] for tp, o in tracker.fetch_offsets(group).items()} == \
        {(tp.topic, tp.partition): 5 for tp in committed}
