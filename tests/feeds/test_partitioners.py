"""Producer partitioners (seed 002): Java's murmur2 to the bit, and each strategy on a real producer."""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from assignors.java import murmur2, to_positive
from streaming.kafka_client.topics import ensure_topics
from streaming.feeds.partitioners import (
    InvalidRecord,
    KeyHashPartitioner,
    PowerUserPartitioner,
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    partition_for_key,
)


class Cluster:
    """The two calls a partitioner makes on kafka-python's ClusterMetadata."""

    def __init__(self, n: int, unavailable=()):
        self.n, self.unavailable = n, set(unavailable)

    def partitions_for_topic(self, topic):
        return set(range(self.n))

    def available_partitions_for_topic(self, topic):
        return set(range(self.n)) - self.unavailable


# Kafka's UtilsTest.testMurmur2 values.
@pytest.mark.parametrize(
    "data,expected",
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_java(data, expected):
    assert murmur2(data) == expected
    assert kafka_python_murmur2(data) == expected & 0xFFFFFFFF  # and kafka-python agrees (it returns unsigned)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python_bit_for_bit(data):
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=40), st.integers(min_value=1, max_value=200))
def test_keyed_partition_agrees_with_kafka_python_default(key, n):
    class Known(Cluster):
        def topics(self):
            return {"t"}

    expected = DefaultPartitioner().partition("t", None, key, None, b"", Known(n))
    assert partition_for_key(key, n) == expected
    assert KeyHashPartitioner().partition("t", None, key, None, b"", Known(n)) == expected


def test_to_positive_is_not_abs():
    assert to_positive(-(2**31)) == 0 and to_positive(-1) == 2**31 - 1 and to_positive(5) == 5


def test_keyed_records_hash_and_spread():
    p = KeyHashPartitioner()
    counts = collections.Counter(
        p.partition("t", None, f"user-{i}".encode(), None, b"v", Cluster(6)) for i in range(6_000)
    )
    assert set(counts) == set(range(6)) and min(counts.values()) > 800
    assert p.partition("t", None, b"group-0", None, b"", Cluster(4)) == partition_for_key(b"group-0", 4)


def test_keyless_records_stick_until_a_new_batch():
    p = KeyHashPartitioner(rng=random.Random(1))
    cluster = Cluster(5)
    first = {p.partition("t", None, None, None, b"v", cluster) for _ in range(50)}
    assert len(first) == 1
    (stuck,) = first
    p.on_new_batch("t", cluster, stuck)
    assert p.partition("t", None, None, None, b"v", cluster) != stuck


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: KeyHashPartitioner(rng=random.Random(seed)),
        lambda seed: UniformStickyPartitioner(
            batch_size=10**9, linger_ms=10**9, rng=random.Random(seed), clock=lambda: 0.0
        ),
    ],
    ids=["key-hash", "uniform-sticky"],
)
@pytest.mark.parametrize("seed", range(20))
def test_a_stale_new_batch_call_leaves_the_sticky_partition(make, seed):
    """StickyPartitionCacheTest.testStickyPartitionCache: a new batch on the sticky partition moves it (never to
    itself); a second call naming the old partition (another thread was first) leaves the new one; a topic with one
    partition stays on it."""
    p, three, one = make(seed), Cluster(3), Cluster(1)
    part_a = p.partition("A", None, None, None, b"v", three)
    assert part_a == p.partition("A", None, None, None, b"v", three)
    part_b = p.partition("B", None, None, None, b"v", one)
    p.on_new_batch("A", three, part_a)
    changed = p.partition("A", None, None, None, b"v", three)
    assert changed != part_a
    p.on_new_batch("A", three, part_a)
    assert p.partition("A", None, None, None, b"v", three) == changed
    p.on_new_batch("B", one, part_b)
    assert p.partition("B", None, None, None, b"v", one) == part_b == 0


def test_round_robin_cycles_over_available_partitions():
    p = RoundRobinPartitioner()
    assert [p.partition("t", None, b"k", None, b"", Cluster(3)) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    p = RoundRobinPartitioner()
    assert [p.partition("t", None, None, None, b"", Cluster(4, unavailable={1})) for _ in range(4)] == [0, 2, 3, 0]


def test_round_robin_repick_after_new_batch_does_not_skip():
    # The producer's keyless path: partition(), abort, on_new_batch(prev), partition() again.
    p, cluster = RoundRobinPartitioner(), Cluster(3)
    picks = []
    for _ in range(6):
        first = p.partition("t", None, None, None, b"", cluster)
        p.on_new_batch("t", cluster, first)
        picks.append(p.partition("t", None, None, None, b"", cluster))
    assert picks == [0, 1, 2, 0, 1, 2]


def test_uniform_sticky_moves_away_on_new_batch():
    p = UniformStickyPartitioner(batch_size=10_000, linger_ms=10_000, rng=random.Random(7), clock=lambda: 0.0)
    cluster = Cluster(4)
    for _ in range(20):
        before = p.partition("t", None, None, None, b"v", cluster)
        assert p.partition("t", None, None, None, b"v", cluster) == before  # sticky
        p.on_new_batch("t", cluster, before)
        assert p.partition("t", None, None, None, b"v", cluster) != before


def test_uniform_sticky_spreads_batches_evenly_over_time():
    p = UniformStickyPartitioner(batch_size=1_000, linger_ms=10_000, rng=random.Random(11), clock=lambda: 0.0)
    counts = collections.Counter(p.choose("t", list(range(4)), 100) for _ in range(40_000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(v % 1_000 == 0 for v in (c * 100 for c in counts.values()))  # whole batches of 10 records
    assert max(counts.values()) < 1.3 * min(counts.values())


def test_uniform_sticky_switches_on_full_batch_and_on_linger():
    now = [0.0]
    p = UniformStickyPartitioner(batch_size=100, linger_ms=10, rng=random.Random(3), clock=lambda: now[0])
    picks = [p.choose("t", [0, 1, 2], 30) for _ in range(4)]  # 4 x 30 bytes: full after the 4th record
    assert len(set(picks)) == 1
    after_full = p.choose("t", [0, 1, 2], 30)
    assert after_full != picks[0]
    now[0] += 0.011  # linger passed
    assert p.choose("t", [0, 1, 2], 1) != after_full
    # keys do not matter to it
    assert len({p.partition("t", None, f"k{i}".encode(), None, b"x", Cluster(3)) for i in range(5)}) == 1


def test_power_user_partitioner_pins_one_key():
    p = PowerUserPartitioner("CEO")
    assert p.partition("t", "CEO", b"CEO", None, b"", Cluster(5)) == 4
    others = {p.partition("t", f"u{i}", f"u{i}".encode(), None, b"", Cluster(5)) for i in range(500)}
    assert others == {0, 1, 2, 3}
    with pytest.raises(InvalidRecord):
        p.partition("t", None, None, None, b"", Cluster(5))
    # The seed's Math.abs(murmur2(key)) % (n - 1): murmur2("foobar") is -790332482 (Kafka's UtilsTest), so with
    # four partitions "foobar" goes to 790332482 % 3 = 2 (dropping the sign bit instead would give 0).
    assert murmur2(b"foobar") == -790332482
    assert p.partition("t", "foobar", b"foobar", None, b"", Cluster(4)) == 2


def _read_back(bootstrap: str, topic: str, partitions: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3_000, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    records = list(consumer)
    consumer.close()
    return records


@pytest.mark.kafka
@pytest.mark.parametrize("make", [KeyHashPartitioner, RoundRobinPartitioner, lambda: PowerUserPartitioner("CEO")])
def test_real_producer_lands_keyed_records_where_the_partitioner_says(kafka_bootstrap, topic_name, make):
    ensure_topics(kafka_bootstrap, {topic_name: 4})
    partitioner = make()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, partitioner=partitioner, acks="all")
    keys = ["CEO"] + [f"user-{i}" for i in range(19)]
    sent = {}
    for key in keys:
        metadata = producer.send(topic_name, key=key.encode(), value=key.encode()).get(timeout=30)
        sent[key] = metadata.partition
    producer.close()
    landed = {r.key.decode(): r.partition for r in _read_back(kafka_bootstrap, topic_name, 4)}
    assert landed == sent
    if isinstance(partitioner, KeyHashPartitioner):
        assert all(p == partition_for_key(k.encode(), 4) for k, p in landed.items())
    if isinstance(partitioner, RoundRobinPartitioner):
        assert [landed[k] for k in keys] == [i % 4 for i in range(len(keys))]
    if isinstance(partitioner, PowerUserPartitioner):
        assert landed["CEO"] == 3 and all(p < 3 for k, p in landed.items() if k != "CEO")


@pytest.mark.kafka
def test_real_producer_keyless_round_robin_visits_every_partition_in_turn(kafka_bootstrap, topic_name):
    # Each record is sent and awaited alone, so every send opens a new batch (the abort + on_new_batch path).
    ensure_topics(kafka_bootstrap, {topic_name: 3})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, partitioner=RoundRobinPartitioner(), acks="all")
    sent = [producer.send(topic_name, value=str(i).encode()).get(timeout=30).partition for i in range(9)]
    producer.close()
    assert sent == [0, 1, 2] * 3
    landed = {int(r.value): r.partition for r in _read_back(kafka_bootstrap, topic_name, 3)}
    assert [landed[i] for i in range(9)] == sent


@pytest.mark.kafka
@pytest.mark.parametrize(
    "make",
    [
        lambda: KeyHashPartitioner(rng=random.Random(5)),
        lambda: UniformStickyPartitioner(batch_size=100_000, linger_ms=60_000, rng=random.Random(5)),
    ],
)
def test_real_producer_sticky_partitioners_fill_one_batch_then_move(kafka_bootstrap, topic_name, make):
    ensure_topics(kafka_bootstrap, {topic_name: 4})
    # A long linger keeps the first batch open: all 30 records stick to its partition.
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, partitioner=make(), acks="all", linger_ms=60_000)
    burst = [producer.send(topic_name, value=f"a{i}".encode()) for i in range(30)]
    producer.flush(timeout=30)
    first = {f.get(timeout=30).partition for f in burst}
    assert len(first) == 1
    # The next keyless record needs a new batch on that partition, so the producer moves the stickiness elsewhere.
    pending = producer.send(topic_name, value=b"b0")
    producer.flush(timeout=30)
    after = pending.get(timeout=30).partition
    producer.close()
    assert after not in first
    landed = collections.Counter(r.partition for r in _read_back(kafka_bootstrap, topic_name, 4))
    assert landed == collections.Counter({first.pop(): 30, after: 1})
