"""Apache Kafka 4.x from Maven jars (fixture ``apache_kafka4``): real consumers form a group on it, and its
``__consumer_offsets`` holds what its group coordinator decided, in bytes our codec reads."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.base import MemberState

from offsets_store import decode_record, partition_for
from streaming.local.broker import wait_until_ready
from tests.groups import OWN_PROCESSES


pytestmark = pytest.mark.xdist_group(OWN_PROCESSES)


def _consumers_until_stable(bootstrap: str, group: str, topic: str, count: int, timeout_s: float = 60.0):
    """``count`` consumers of ``group``, each polled in a thread of its own (as each application would) until all are
    Stable in one generation with partitions. A poll waits up to 3 s: kafka-python 3.0.12 sometimes loses a JoinGroup
    answer that arrives after a poll gave up waiting for it (see tests/kafka4_history.py), which one thread polling
    every consumer for 100 ms in turn made likely."""
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"member-{i}",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
        )
        for i in range(count)
    ]
    stop = threading.Event()

    def polled(consumer: KafkaConsumer) -> None:
        while not stop.is_set():
            consumer.poll(timeout_ms=3_000)

    def stable(states) -> bool:
        return (
            all(s.state is MemberState.STABLE for s in states)
            and len({s.generation_id for s in states}) == 1
            and all(c.assignment() for c in consumers)
        )

    threads = [threading.Thread(target=polled, args=(c,), daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not stable([c.group_metadata() for c in consumers]):
            assert time.monotonic() < deadline, f"no common generation within {timeout_s:.0f}s"
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    return consumers, [c.group_metadata() for c in consumers]


def _group_records(bootstrap: str, group: str, timeout_s: float = 30.0) -> list[dict]:
    """Every record of ``group`` in the broker's ``__consumer_offsets``, decoded with our codec, in log order."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="offsets-reader")
    try:
        partition = TopicPartition("__consumer_offsets", partition_for(group))
        reader.assign([partition])
        reader.seek_to_beginning(partition)
        end = reader.end_offsets([partition])[partition]
        records, deadline = [], time.monotonic() + timeout_s
        while reader.position(partition) < end:
            assert time.monotonic() < deadline, "could not read __consumer_offsets to its end"
            for batch in reader.poll(timeout_ms=500).values():
                records += [decode_record(r.key, r.value) for r in batch]
        return [r for r in records if r.get("group_id") == group]
    finally:
        reader.close()


def test_two_consumers_form_a_generation_the_broker_writes_to_consumer_offsets(apache_kafka4):
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    apache_kafka4.create_topics({topic: 4})
    consumers, states = _consumers_until_stable(apache_kafka4.bootstrap, group, topic, 2)
    try:
        assigned = [c.assignment() for c in consumers]
        assert set().union(*assigned) == {TopicPartition(topic, p) for p in range(4)}
        assert not assigned[0] & assigned[1]
        consumers[0].commit({TopicPartition(topic, 0): OffsetAndMetadata(7, "m", -1)})
        generation = states[0].generation_id
        records = _group_records(apache_kafka4.bootstrap, group)
    finally:
        for consumer in consumers:
            consumer.close()
    snapshots = [r for r in records if r["type"] == "group_metadata" and not r.get("tombstone")]
    assert snapshots, records
    last = snapshots[-1]
    # What Kafka 4's group coordinator wrote for the generation both consumers are in: a classic "consumer" group
    # whose members are exactly these two, the leader one of them, the protocol kafka-python's first choice.
    assert (last["generation"], last["protocol_type"], last["protocol"]) == (generation, "consumer", "range")
    assert sorted(m["member_id"] for m in last["members"]) == sorted(s.member_id for s in states)
    assert last["leader"] in {s.member_id for s in states}
    assert {m["client_id"] for m in last["members"]} == {"member-0", "member-1"}
    commits = [r for r in records if r["type"] == "offset_commit"]
    assert [(c["topic"], c["partition"], c["offset"], c["metadata"]) for c in commits] == [(topic, 0, 7, "m")]


def test_the_broker_command_runs_kafka_4_until_interrupted(apache_kafka4):
    """``rebalance-tracker broker --apache-kafka 4``: a broker that answers at the printed bootstrap, stopped by
    Ctrl-C with its scratch directory. (``apache_kafka4``: only for its skip where Kafka 4 cannot run.)"""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming", "broker", "--apache-kafka", "4"],
        text=True,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        out = "".join(proc.stdout.readline() for _ in range(3))
        bootstrap = re.search(r"bootstrap=(127\.0\.0\.1:\d+)", out).group(1)
        scratch = re.search(r"scratch dir (\S+?)\)", out).group(1)
        assert f"Apache Kafka {apache_kafka4.version}" in out and os.path.isdir(scratch)
        wait_until_ready(bootstrap, timeout_s=30)  # a loaded machine starts the JVM slowly
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert not os.path.exists(scratch)
    finally:
        if proc.poll() is None:
            proc.kill()
