"""``rebalance-tracker offsets``: the kafka-consumer-groups.sh --describe table, with and without a broker."""

from __future__ import annotations

import time

import pytest

from offsets_store import open_store
from offsets_store.describe import default_bootstrap
from offsets_store.describe import main as describe_main

TS = 1_700_000_000_000
HEADER = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
    "LAG-SECONDS",
]


def commit(group, topic, partition, offset):
    return {
        "type": "offset_commit",
        "group_id": group,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": TS,
        "expire_timestamp": -1,
    }


def group_record(group, member, partitions):
    return {
        "type": "group_metadata",
        "group_id": group,
        "protocol_type": "consumer",
        "generation": 3,
        "protocol": "range",
        "leader": member,
        "current_state_timestamp": TS,
        "members": [
            {
                "member_id": member,
                "group_instance_id": None,
                "client_id": "app",
                "client_host": "/10.0.0.7",
                "rebalance_timeout": 30_000,
                "session_timeout": 10_000,
                "subscription": {
                    "topics": sorted({t for t, _ in partitions}),
                    "owned_partitions": [],
                    "generation": -1,
                },
                "assignment": {"partitions": partitions},
            }
        ],
    }


def test_table_without_a_broker(tmp_path, capsys):
    url = f"sqlite:{tmp_path / 'o.db'}"
    with open_store(url) as store:
        # partition 2 is assigned but never committed; it still gets a row, like Kafka's tool shows it.
        store.write(
            [
                commit("orders", "t", 0, 40),
                commit("orders", "t", 1, 41),
                group_record("orders", "m-1", [["t", 0], ["t", 1], ["t", 2]]),
            ],
            batch_id=0,
        )
    assert describe_main(["--group", "orders", "--store", url, "--bootstrap", ""]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        HEADER,
        ["orders", "t", "0", "40", "-", "-", "m-1", "/10.0.0.7", "app", "-"],
        ["orders", "t", "1", "41", "-", "-", "m-1", "/10.0.0.7", "app", "-"],
        ["orders", "t", "2", "-", "-", "-", "m-1", "/10.0.0.7", "app", "-"],
    ]
    assert describe_main(["--group", "nobody", "--store", url, "--bootstrap", ""]) == 1


def test_unreachable_broker_shows_dashes_quickly(tmp_path, capsys):
    url = f"sqlite:{tmp_path / 'o.db'}"
    with open_store(url) as store:
        store.write([commit("g", "t", 0, 4)])
    started = time.monotonic()
    assert describe_main(["--group", "g", "--store", url, "--bootstrap", "127.0.0.1:1"]) == 0
    assert time.monotonic() - started < 15
    assert capsys.readouterr().out.splitlines()[1].split() == ["g", "t", "0", "4", "-", "-", "-", "-", "-", "-"]


def test_default_bootstrap(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    assert default_bootstrap("kafka:h1:9092,h2:9092/offsets?partitions=5") == "h1:9092,h2:9092"
    assert default_bootstrap("sqlite:data/o.db") is None
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "b:1")
    assert default_bootstrap("sqlite:data/o.db") == "b:1"


def produce(bootstrap, topic, partition, n, age_s=0.0):
    """``n`` records, each stamped (CreateTime) ``age_s`` seconds ago."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for _ in range(n):
        producer.send(topic, value=b"x", partition=partition, timestamp_ms=int((time.time() - age_s) * 1000))
    producer.flush()
    producer.close()


@pytest.mark.kafka
def test_lag_from_the_broker(tmp_path, capsys, kafka_bootstrap, topic_name):
    produce(kafka_bootstrap, topic_name, 0, 4, age_s=600)  # consumed
    produce(kafka_bootstrap, topic_name, 0, 6, age_s=90)  # not yet: the oldest unconsumed is 90 s old
    url = f"sqlite:{tmp_path / 'o.db'}"
    with open_store(url) as store:
        store.write([commit("g", topic_name, 0, 4)], batch_id=0)
    assert describe_main(["--group", "g", "--store", url, "--bootstrap", kafka_bootstrap]) == 0
    out = capsys.readouterr()
    row = out.out.splitlines()[1].split()
    assert row[3:6] == ["4", "10", "6"]
    assert 90 <= float(row[9]) < 120 and "LAG-SECONDS: now - the timestamp of the record" in out.err


@pytest.mark.kafka
def test_kafka_store_brings_its_own_broker(capsys, kafka_bootstrap, topic_name, monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    produce(kafka_bootstrap, topic_name, 0, 7)
    url = f"kafka:{kafka_bootstrap}/{topic_name}-offsets?partitions=3"
    with open_store(url) as store:
        store.write([commit("g", topic_name, 0, 2), group_record("g", "m-9", [[topic_name, 0]])], batch_id=0)
    assert describe_main(["--group", "g", "--store", url]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:9] == ["g", topic_name, "0", "2", "7", "5", "m-9", "/10.0.0.7", "app"] and float(row[9]) >= 0
