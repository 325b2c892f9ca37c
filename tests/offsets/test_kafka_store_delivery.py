"""The Kafka-topic store vouches only for what Kafka acknowledged (issue #13): a record Kafka refuses fails the write
with a clear error and no batch marker, and a broker that goes away mid-write is waited for -- nothing lost."""

from __future__ import annotations


import pytest

from offsets_store import open_store
from streaming.kafka_client.delivery import DeliveryError
from offsets_store.kafka_store import KafkaStore
from tests.persistent_broker import waits_out_an_outage

pytestmark = pytest.mark.kafka

TS = 1_700_000_000_000


def commit(partition: int, offset: int, metadata: str = "") -> dict:
    return {
        "type": "offset_commit",
        "group_id": "g",
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "leader_epoch": -1,
        "metadata": metadata,
        "commit_timestamp": TS,
        "expire_timestamp": -1,
    }


def stored_offsets(bootstrap: str, topic: str) -> tuple[dict, int]:
    """What a fresh store reads back: the live offsets and the batch marker."""
    with KafkaStore(bootstrap, topic, partitions=3) as store:
        offsets = {r["partition"]: r["offset"] for r in store.load_records() if r["type"] == "offset_commit"}
        return offsets, store.last_batch_id()


def test_a_record_kafka_refuses_fails_the_write_and_writes_no_marker(kafka_bootstrap, topic_name):
    # The producer refuses a record above its max_request_size before sending it; kafka-python's flush() says nothing.
    store = KafkaStore(kafka_bootstrap, topic_name, partitions=3, client={"max_request_size": 2048})
    store.write([commit(0, 10), commit(1, 20)], batch_id=0)
    with pytest.raises(DeliveryError, match=r"batch 1.*MessageSizeTooLarge"):
        store.write([commit(0, 11), commit(2, 30, metadata="m" * 4096)], batch_id=1)
    assert store.last_batch_id() == 0
    store.close()
    offsets, marker = stored_offsets(kafka_bootstrap, topic_name)
    assert marker == 0, "the marker vouched for a batch Kafka did not take in full"
    assert 2 not in offsets and offsets[1] == 20


def test_a_write_waits_out_a_broker_outage(persistent_broker, topic_name):
    bootstrap = persistent_broker.bootstrap
    url = f"kafka:{bootstrap}/{topic_name}?partitions=3"
    store = open_store(url)
    store.write([commit(0, 1), commit(1, 1)], batch_id=0)
    waits_out_an_outage(persistent_broker, lambda: store.write([commit(0, 2), commit(2, 7)], batch_id=1))
    store.close()
    assert stored_offsets(bootstrap, topic_name) == ({0: 2, 1: 1, 2: 7}, 1)
