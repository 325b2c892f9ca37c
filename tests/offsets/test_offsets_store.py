"""The compacted offsets store, both backends: compaction, tombstones, idempotent batches, surviving a kill, and a
restarted coordinator answering exactly as before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from kafka import KafkaConsumer, TopicPartition

from offsets_store import encode_record, open_store, partition_for
from offsets_store.store import STORE_TYPES, compact
from streaming.coordinator import GroupCoordinator
from streaming.feeds.simulator import SimulationSettings, Simulator

TS = 1_700_000_000_000


def commit(group, topic, partition, offset, ts=TS, **kw):
    return {
        "type": "offset_commit",
        "group_id": group,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": ts,
        "expire_timestamp": -1,
        **kw,
    }


def tombstone(group, topic, partition):
    return {"type": "offset_commit", "group_id": group, "topic": topic, "partition": partition, "tombstone": True}


def live_offsets(store) -> dict:
    return {
        (r["group_id"], r["topic"], r["partition"]): r["offset"]
        for r in store.load_records()
        if r["type"] == "offset_commit"
    }


def test_sqlite_compaction_tombstones_and_batch_replay(tmp_path, caplog):
    store = open_store(f"sqlite:{tmp_path / 'o.db'}")
    store.write([commit("g", "t", 0, 1), commit("g", "t", 1, 1), commit("g", "t", 0, 5)], batch_id=0)
    assert live_offsets(store) == {("g", "t", 0): 5, ("g", "t", 1): 1}
    store.write([tombstone("g", "t", 1), commit("h", "t", 0, 3)], batch_id=1)
    assert live_offsets(store) == {("g", "t", 0): 5, ("h", "t", 0): 3}
    store.write([commit("g", "t", 0, 999)], batch_id=1)  # a replay of batch 1: already applied
    assert live_offsets(store)[("g", "t", 0)] == 5 and not caplog.records
    store.write([commit("g", "t", 0, 1)], batch_id=0)  # further back: a reset checkpoint, say so
    assert live_offsets(store)[("g", "t", 0)] == 5
    assert "checkpoint" in caplog.text
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


def test_compact_keeps_each_keys_last_record_and_every_other_output_in_order():
    state = {"type": "state_change", "group_id": "g", "ts": TS}
    group = {"type": "group_metadata", "group_id": "g", "generation": 1}
    member = {"type": "consumer_group_member_metadata", "group_id": "g", "member_id": "m", "clientId": "a"}
    outputs = [
        commit("g", "t", 0, 1),
        state,
        commit("g", "t", 0, 5),
        commit("g", "t", 1, 2),
        group,
        tombstone("g", "t", 1),
        member,
        commit("h", "t", 0, 9),
        dict(group, generation=2),
        dict(member, clientId="b"),
        commit("g", "t", 0, 3, key_version=0),
    ]
    # A key version is part of the key's bytes: an OffsetCommitKey v0 is another key than the v1 a broker writes.
    assert compact(outputs) == [
        state,
        commit("g", "t", 0, 5),
        tombstone("g", "t", 1),
        commit("h", "t", 0, 9),
        dict(group, generation=2),
        dict(member, clientId="b"),
        commit("g", "t", 0, 3, key_version=0),
    ]
    assert compact([state, commit("g", "t", 0, 1)]) == [state, commit("g", "t", 0, 1)]


def test_a_compacted_batch_leaves_the_store_as_the_whole_batch_does(tmp_path):
    """Over a simulated feed's records: writing each micro-batch compacted or whole gives the same store."""
    coordinator = GroupCoordinator()
    outputs = [
        o
        for e in Simulator(SimulationSettings(groups=3, seed=2), start_ms=TS).run_until(TS + 120_000)
        for o in coordinator.handle(e)
    ]
    whole, compacted = open_store(f"sqlite:{tmp_path / 'a.db'}"), open_store(f"sqlite:{tmp_path / 'b.db'}")
    records = 0
    for batch_id, start in enumerate(range(0, len(outputs), 700)):
        batch = outputs[start : start + 700]
        whole.write(batch, batch_id=batch_id)
        compacted.write(compact(batch), batch_id=batch_id)
        records += sum(1 for o in compact(batch) if o["type"] in STORE_TYPES)
    assert compacted.load_records() == whole.load_records()
    assert records < sum(1 for o in outputs if o["type"] in STORE_TYPES) / 2


def test_sqlite_store_survives_sigkill(tmp_path):
    url = f"sqlite:{tmp_path / 'o.db'}"
    write_then_sigkill(url, 50)
    store = open_store(url)
    check_after_kill(store, 50)
    store.close()


def rebuild_check(store_url: str):
    # A simulated run's feed through a fresh coordinator: exactly the records Kafka would have written.
    settings = SimulationSettings(groups=3, seed=4, churn_interval_ms=10_000)
    feed = Simulator(settings, start_ms=TS).run_until(TS + 3 * 60_000)
    fresh = GroupCoordinator(Simulator(settings, start_ms=TS).coordinator.config)
    records = [o for event in feed for o in fresh.handle(event) if o["type"] in ("offset_commit", "group_metadata")]
    assert any(r["type"] == "group_metadata" for r in records) and any(r["type"] == "offset_commit" for r in records)
    store = open_store(store_url)
    for i in range(0, len(records), 25):
        store.write(records[i : i + 25], batch_id=i)
    store.close()

    reopened = open_store(store_url)  # a new process would do exactly this
    restarted = GroupCoordinator(fresh.config)
    restarted.load_records(reopened.load_records(), now_ms=feed[-1]["ts"])
    reopened.close()
    stable = 0
    for group_id in fresh.group_ids():
        assert restarted.fetch_offsets(group_id) == fresh.fetch_offsets(group_id) != {}
        before, after = fresh.describe_group(group_id), restarted.describe_group(group_id)
        if before["state"] == "Stable":
            assert after == before
            stable += 1
        else:  # mid-rebalance groups come back as of their last written metadata, like Kafka's loading
            assert after["group_id"] == group_id
    assert stable > 0
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

    seen = markers = 0
    for record in consumer:
        decoded = decode_record(record.key, record.value)
        if decoded["type"] == "unknown":  # only our batch marker, which Kafka's readers would skip likewise
            assert decoded["record_type"] == "RebalanceTrackerBatchMarker" and record.partition == 0
            markers += 1
            continue
        assert record.partition == partition_for(decoded["group_id"], 5)
        seen += 1
    consumer.close()
    assert seen > 0 and markers > 0


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


def write_then_sigkill(url: str, batches: int) -> None:
    """A separate process writes ``batches`` batches to the store and is SIGKILLed without closing it."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        from offsets_store import open_store
        store = open_store({url!r})
        for batch in range({batches}):
            store.write([{{"type": "offset_commit", "group_id": f"g{{batch % 5}}", "topic": "t", "partition": p,
                           "offset": batch * 10 + p, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1,
                           "expire_timestamp": -1}} for p in range(4)], batch_id=batch)
        store.write([{{"type": "group_metadata", "group_id": "g0", "protocol_type": "consumer", "generation": 2,
                       "protocol": None, "leader": None, "current_state_timestamp": 5, "members": []}},
                     {{"type": "offset_commit", "group_id": "g1", "topic": "t", "partition": 3, "tombstone": True}}],
                    batch_id={batches})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()[-2000:]


def check_after_kill(store, batches: int) -> None:
    expected = {(f"g{b % 5}", "t", p): b * 10 + p for b in range(batches - 5, batches) for p in range(4)}
    del expected[("g1", "t", 3)]
    assert live_offsets(store) == expected
    assert store.group("g0")["generation"] == 2 and store.group("g0")["members"] == []
    assert store.last_batch_id() == batches
    store.write([commit("g0", "t", 0, -7)], batch_id=batches)  # the last batch replayed after the restart: no-op
    assert live_offsets(store) == expected


@pytest.mark.kafka
def test_kafka_store_survives_sigkill_and_ignores_replayed_batches(kafka_bootstrap, topic_name):
    url = f"kafka:{kafka_bootstrap}/{topic_name}?partitions=4"
    write_then_sigkill(url, 12)
    store = open_store(url)
    check_after_kill(store, 12)
    store.close()
    reopened = open_store(url)  # and the skipped replay left no trace in the topic
    check_after_kill(reopened, 12)
    reopened.close()


@pytest.mark.kafka
def test_kafka_store_loads_kip848_records_and_skips_share_group_ones(kafka_bootstrap, topic_name):
    from kafka import KafkaProducer

    url = f"kafka:{kafka_bootstrap}/{topic_name}?partitions=2"
    store = open_store(url)
    store.write([commit("g", "t", 0, 3)])
    store.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    # Written next to ours by a KIP-848 broker: a ConsumerGroupMetadata record (type 3: group "g", epoch 1, no tagged
    # fields) and a ShareGroupMetadata one (type 11), which nothing here decodes.
    producer.send(topic_name, key=b"\x00\x03\x00\x01g", value=b"\x00\x00\x00\x00\x00\x01\x00", partition=0)
    producer.send(topic_name, key=b"\x00\x0b\x00\x01s", value=b"\x00\x00\x00\x00\x00\x01\x00", partition=0)
    producer.flush()
    producer.close()
    reopened = open_store(url)
    assert live_offsets(reopened) == {("g", "t", 0): 3} and reopened.groups() == ["g"]
    assert [r for r in reopened.load_records() if r["type"] != "offset_commit"] == [
        {
            "type": "consumer_group_metadata",
            "group_id": "g",
            "epoch": 1,
            "metadataHash": 0,
            "creationTimeMs": -1,
            "tombstone": False,
            "value_version": 0,
        }
    ]
    assert reopened.consumer_group("g")["group_epoch"] == 1
    reopened.close()


@pytest.mark.kafka
def test_kafka_store_keeps_an_existing_topics_partition_count(kafka_bootstrap, topic_name):
    with open_store(f"kafka:{kafka_bootstrap}/{topic_name}?partitions=3") as store:
        store.write([commit("payments", "t", 0, 1)])
    with open_store(f"kafka:{kafka_bootstrap}/{topic_name}") as reopened:  # default 50 requested
        assert reopened.partitions == 3
        reopened.write([commit("payments", "t", 0, 2)])  # partition_for("payments", 50) = 13 would not exist
    with open_store(f"kafka:{kafka_bootstrap}/{topic_name}") as third:
        assert live_offsets(third) == {("payments", "t", 0): 2}
