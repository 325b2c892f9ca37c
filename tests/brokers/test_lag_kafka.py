"""Lag on a real broker (Apache Kafka 4): a consumer slowed until it falls behind, then a second one joins and takes
a partition over. The feed is what the tracker reads -- the consumers' instrumented group protocol and the
log-end sampler's samples on one events topic -- and the lag it gives is checked against the records themselves:
their timestamps say how old the oldest unconsumed one really was."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor

from streaming.coordinator.events import parse_event
from streaming.coordinator.lag import INTERPOLATED, PARTITION_LAG, REBALANCE_LAG, LagBook
from streaming.coordinator.routing import Configs, run_feed
from streaming.feeds.instrument import instrument
from streaming.feeds.log_end_sampler import LogEndSampler
from streaming.spark.group_step import step_group
from tests.broker_history import read_feed, wait_until
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

OBSERVE = {"tracker.adopt.unknown.members": "true"}
PER_SECOND = 20  # records a second on each partition


class Producing(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name="producing")
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        self.topic, self.stop_event = topic, threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(1 / PER_SECOND):
            for partition in (0, 1):
                self.producer.send(self.topic, value=b"x", partition=partition)
        self.producer.flush()
        self.producer.close()


class Member(threading.Thread):
    """A consumer that commits after every poll and spends ``pause_s`` on each: slowed, it falls behind."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, events_topic: str, pause_s: float) -> None:
        super().__init__(daemon=True, name=name)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            session_timeout_ms=6_000,
            heartbeat_interval_ms=500,
            max_poll_records=4,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RangePartitionAssignor],
        )
        # Its metadata before it joins: kafka-python may otherwise send its first JoinGroup before the topic's
        # metadata came, and as leader assign nothing (seen once with the machine loaded: no commits for 60 s).
        assert self.consumer.partitions_for_topic(topic) == {0, 1}
        instrument(self.consumer, self.producer, events_topic, heartbeat_every_ms=1_000)
        self.pause_s, self.stop_event = pause_s, threading.Event()
        self.commits: list[tuple[int, int, int]] = []  # (ms, partition, offset) the broker accepted

    def run(self) -> None:
        while not self.stop_event.is_set():
            batches = self.consumer.poll(timeout_ms=200)
            if batches:
                offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batches.items()}
                self.consumer.commit(offsets)
                now = int(time.time() * 1000)
                self.commits += [(now, tp.partition, o.offset) for tp, o in offsets.items()]
                time.sleep(self.pause_s)
        self.consumer.close()
        self.producer.flush()
        self.producer.close()


def record_times(bootstrap: str, topic: str) -> dict[tuple[int, int], int]:
    """(partition, offset) -> the record's timestamp, for every record of the topic."""
    reader = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000, max_poll_records=5_000
    )
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    reader.assign(tps)
    reader.seek_to_beginning(*tps)
    times = {(r.partition, r.offset): r.timestamp for r in reader}
    reader.close()
    return times


def test_a_slowed_consumer_shows_lag_and_the_rebalance_that_relieves_it_shows_its_cost(apache_kafka4):
    bootstrap = apache_kafka4.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topic, events_topic, group = f"lag-data-{suffix}", f"lag-events-{suffix}", f"lag-group-{suffix}"
    apache_kafka4.create_topics({topic: 2, events_topic: 1})
    producing = Producing(bootstrap, topic)
    slow = Member(bootstrap, topic, group, "slow", events_topic, pause_s=0.5)  # 8 records a second at most
    fast = Member(bootstrap, topic, group, "fast", events_topic, pause_s=0.0)
    sampler = LogEndSampler(bootstrap, events_topic, interval_s=0.5)
    sampler.observe([{"type": "offset_commit", "group_id": group, "topic": topic, "partition": 0}])
    producing.start()
    slow.start()
    sampler.start()
    try:
        wait_until(lambda: len(slow.commits) > 10, 60, "the slow consumer's commits")
        time.sleep(6)  # it falls behind: 40 a second come in
        joined_ms = int(time.time() * 1000)
        fast.start()  # range: it takes one partition (by member id)
        wait_until(lambda: fast.commits, 60, "the new owner's first commit")
        time.sleep(3)  # it catches up; samples say so
    finally:
        sampler.stop()
        for member in (fast, slow):
            member.stop_event.set()
        for member in (fast, slow):
            if member.is_alive() or member.ident:
                member.join(15)
        producing.stop_event.set()
        producing.join(5)
    feed = sorted(read_feed(bootstrap, events_topic, {}), key=lambda e: e["ts"])
    times = record_times(bootstrap, topic)

    outputs, rejected = run_feed(feed, Configs.from_properties(OBSERVE))
    assert rejected == 0
    derived = LagBook().add_all(outputs)
    figures = [d for d in derived if d["type"] == PARTITION_LAG and d["lag_records"] is not None]

    # Slowed, the group fell behind on both partitions, and the seconds are the records' real age: the sample's
    # time less the timestamp of the record at the committed offset (within the samples' spacing and more).
    before = [f for f in figures if f["ts"] < joined_ms]
    assert max(f["lag_records"] for f in before) > 4 * PER_SECOND, before[-4:]
    assert max(f["lag_seconds"] for f in before) > 3.0
    checked = [
        f for f in before if f["lag_seconds_method"] == INTERPOLATED and (f["partition"], f["committed"]) in times
    ]
    assert len(checked) >= 5
    for f in checked:
        real = (f["ts"] - times[(f["partition"], f["committed"])]) / 1000
        assert abs(f["lag_seconds"] - real) <= 1.0, (f, real)

    # The rebalance that gave a partition to the new member, and the lag built from its release until the new
    # owner's first commit: the records produced in between, and the slowed group's seconds growing further.
    first, moved, _ = min(fast.commits)
    (cost,) = [
        d
        for d in derived
        if d["type"] == REBALANCE_LAG and any(row[1] == moved and row[3] is not None for row in d["partitions"])
    ][:1]
    rebalance = next(o for o in outputs if o["type"] == "rebalance" and o["ts"] == cost["rebalance_ts"])
    assert any(span[:2] == [topic, moved] for span in rebalance["partitions_without_owner"])
    row = next(r for r in cost["partitions"] if r[1] == moved)
    _, _, released, first_commit, at_release, before_commit, seconds_at_release, seconds_before, _, idle, _ = row
    assert idle == 0  # the group always had a member
    assert abs(first_commit - first) < 1_000  # the new owner's first commit, as it made it
    # Nobody commits the partition in between, so the oldest unconsumed record is the same at both ends: its wait
    # grew by exactly the time from the release to the first commit. The records grew by the log end's growth then,
    # which can be none: the two may be closer than one record's interval (the broker hands the partition over in
    # milliseconds), or a loaded machine holds the producer back.
    assert seconds_at_release > 3.0 and before_commit >= at_release > 0
    assert seconds_before - seconds_at_release == pytest.approx((first_commit - released) / 1000, abs=0.002)
    assert cost["lag_records"] >= before_commit - at_release and cost["lag_seconds"] > 0
    caught_up = [f for f in figures if f["partition"] == moved and f["ts"] > first + 1_500]
    assert caught_up and min(f["lag_records"] for f in caught_up) < PER_SECOND  # the fast owner caught up

    # The same feed gives the same numbers: replayed again, and stepped per group over random micro-batches as
    # the job steps it.
    assert LagBook().add_all(run_feed(feed, Configs.from_properties(OBSERVE))[0]) == derived
    rng, state, stepped, i = random.Random(1), None, [], 0
    mine = [parse_event(e)[0] for e in feed if e["group_id"] == group]
    while i < len(mine):
        batch = mine[i : i + rng.randint(1, 60)]
        i += len(batch)
        result = step_group(state, batch, batch[-1]["ts"] - 1, Configs.from_properties(OBSERVE), keep_types=None)
        state, stepped = result.state, stepped + result.outputs
    assert [d for d in LagBook().add_all(stepped) if d["type"] == REBALANCE_LAG] == [
        d for d in derived if d["type"] == REBALANCE_LAG
    ]
