"""The compacted offsets store, both backends: compaction, tombstones, idempotent batches, surviving a kill, and a
restarted coordinator answering exactly as before."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from kafka import KafkaConsumer, TopicPartition

from offsets_store import encode_record, open_store, partition_for
from offsets_store.describe import main as describe_main
from streaming.coordinator import GroupCoordinator
from streaming.feeds.simulator import SimulationSettings, Simulator

TS = 1_700_000_000_000


def commit(group, topic, partition, offset, ts=TS, **kw):
    return {"type": "offset_commit", "group_id": group, "topic": topic, "partition": partition, "offset": offset,
            "leader_epoch": -1, "metadata": "", "commit_timestamp": ts, "expire_timestamp": -1, **kw}


def tombstone(group, topic, partition):
    return {"type": "offset_commit", "group_id": group, "topic": topic, "partition": partition, "tombstone": True}


def live_offsets(store) -> dict:
    return {(r["group_id"], r["topic"], r["partition"]): r["offset"]
            for r in store.load_records() if r["type"] == "offset_commit"}


def simulated_outputs(minutes: int = 3) -> tuple[list[dict], GroupCoordinator]:
    simulator = Simulator(SimulationSettings(groups=3, seed=4, churn_interval_ms=10_000), start_ms=TS)
    simulator.run_until(TS + minutes * 60_000)
    coordinator = GroupCoordinator(simulator.coordinator.config)
    return simulator, coordinator


def test_sqlite_compaction_tombstones_and_batch_replay(tmp_path):
    store = open_store(f"sqlite:{tmp_path / 'o.db'}")
    store.write([commit("g", "t", 0, 1), commit("g", "t", 1, 1), commit("g", "t", 0, 5)], batch_id=0)
    assert live_offsets(store) == {("g", "t", 0): 5, ("g", "t", 1): 1}
    store.write([tombstone("g", "t", 1), commit("h", "t", 0, 3)], batch_id=1)
    assert live_offsets(store) == {("g", "t", 0): 5, ("h", "t", 0): 3}
    store.write([commit("g", "t", 0, 999)], batch_id=1)          # a replay of batch 1: already applied
    store.write([commit("g", "t", 0, 1)], batch_id=0)
    assert live_offsets(store)[("g", "t", 0)] == 5
    assert store.groups() == ["g", "h"]
    # The stored bytes are exactly Kafka's.
    key, value = encode_record(commit("g", "t", 0, 5))
    assert (key, value) in store.raw_records()
    store.close()


def test_commit_then_tombstone_in_one_batch_leaves_nothing(tmp_path):
    store = open_store(f"sqlite:{tmp_path / 'o.db'}")
    store.write([commit("g", "t", 0, 1), tombstone("g", "t", 0), commit("g", "t", 1, 2)], batch_id=0)
    assert live_offsets(store) == {("g", "t", 1): 2}
    store.close()


def test_sqlite_store_survives_sigkill(tmp_path):
    path = tmp_path / "o.db"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        from offsets_store import open_store
        store = open_store("sqlite:{path}")
        for batch in range(50):
            store.write([{{"type": "offset_commit", "group_id": f"g{{batch % 5}}", "topic": "t", "partition": p,
                           "offset": batch * 10 + p, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1,
                           "expire_timestamp": -1}} for p in range(4)], batch_id=batch)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL
    store = open_store(f"sqlite:{path}")
    expected = {(f"g{b % 5}", "t", p): b * 10 + p for b in range(45, 50) for p in range(4)}
    assert live_offsets(store) == expected and store.last_batch_id() == 49
    store.close()


def rebuild_check(store_url: str):
    simulator, _ = simulated_outputs()
    records = []
    # Re-run the simulator's own feed through a fresh coordinator to collect exactly what Kafka would have written.
    fresh = GroupCoordinator(simulator.coordinator.config)
    feed = Simulator(simulator.settings, start_ms=TS).run_until(TS + 3 * 60_000)
    for event in feed:
        records += [o for o in fresh.handle(event) if o["type"] in ("offset_commit", "group_metadata")]
    assert any(r["type"] == "group_metadata" for r in records) and any(r["type"] == "offset_commit" for r in records)
    store = open_store(store_url)
    for i in range(0, len(records), 25):
        store.write(records[i:i + 25], batch_id=i)
    store.close()

    reopened = open_store(store_url)   # a new process would do exactly this
    restarted = GroupCoordinator(fresh.config)
    restarted.load_records(reopened.load_records(), now_ms=feed[-1]["ts"])
    reopened.close()
    for group_id in fresh.group_ids():
        assert restarted.fetch_offsets(group_id) == fresh.fetch_offsets(group_id)
        before, after = fresh.describe_group(group_id), restarted.describe_group(group_id)
        if before["state"] == "Stable":
            assert after == before
        else:   # mid-rebalance groups come back as of their last written metadata, like Kafka's loading
            assert after["group_id"] == group_id
    return fresh


def test_restart_from_sqlite_answers_offset_fetch_identically(tmp_path):
    rebuild_check(f"sqlite:{tmp_path / 'o.db'}")


@pytest.mark.kafka
def test_restart_from_kafka_compacted_topic(kafka_bootstrap, topic_name):
    url = f"kafka:{kafka_bootstrap}/{topic_name}?partitions=5"
    rebuild_check(url)
    # Each group's records sit in partition_for(group, 5), like __consumer_offsets.
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000)
    tps = [TopicPartition(topic_name, p) for p in range(5)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    from offsets_store import decode_record

    seen = 0
    for record in consumer:
        decoded = decode_record(record.key, record.value)
        assert record.partition == partition_for(decoded["group_id"], 5)
        seen += 1
    consumer.close()
    assert seen > 0


@pytest.mark.kafka
def test_kafka_store_tombstones_and_latest_value(kafka_bootstrap, topic_name):
    url = f"kafka:{kafka_bootstrap}/{topic_name}?partitions=3"
    store = open_store(url)
    store.write([commit("g", "t", 0, 1), commit("g", "t", 1, 2)], batch_id=0)
    store.write([commit("g", "t", 0, 7), tombstone("g", "t", 1)], batch_id=1)
    store.close()
    reopened = open_store(url)
    assert live_offsets(reopened) == {("g", "t", 0): 7}
    reopened.close()


def test_offsets_command_prints_a_describe_table(tmp_path, capsys):
    store = open_store(f"sqlite:{tmp_path / 'o.db'}")
    store.write([commit("orders", "t", 0, 40), commit("orders", "t", 1, 41), {
        "type": "group_metadata", "group_id": "orders", "protocol_type": "consumer", "generation": 3,
        "protocol": "range", "leader": "m-1", "current_state_timestamp": TS, "members": [{
            "member_id": "m-1", "group_instance_id": None, "client_id": "app", "client_host": "/10.0.0.7",
            "rebalance_timeout": 30_000, "session_timeout": 10_000,
            "subscription": {"topics": ["t"], "owned_partitions": [], "generation": -1},
            "assignment": {"partitions": [["t", 0], ["t", 1]]}}]}], batch_id=0)
    store.close()
    assert describe_main(["--group", "orders", "--store", f"sqlite:{tmp_path / 'o.db'}", "--bootstrap", ""]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["orders", "t", "0", "40", "-", "-", "m-1", "/10.0.0.7", "app"]
    assert describe_main(["--group", "nobody", "--store", f"sqlite:{tmp_path / 'o.db'}", "--bootstrap", ""]) == 1


@pytest.mark.kafka
def test_offsets_command_shows_lag_from_the_broker(tmp_path, capsys, kafka_bootstrap, topic_name):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(10):
        producer.send(topic_name, value=b"x", partition=0)
    producer.flush()
    producer.close()
    store = open_store(f"sqlite:{tmp_path / 'o.db'}")
    store.write([commit("g", topic_name, 0, 4)], batch_id=0)
    store.close()
    assert describe_main(["--group", "g", "--store", f"sqlite:{tmp_path / 'o.db'}",
                          "--bootstrap", kafka_bootstrap]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[3:6] == ["4", "10", "6"]
