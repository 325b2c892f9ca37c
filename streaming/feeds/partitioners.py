"""Kafka's producer partitioners (seed 002), usable directly and as kafka-python ``partitioner=`` objects.

* Keyed records go to ``toPositive(murmur2(key)) % n`` (Kafka's ``Utils``, in ``assignors/java.py``).
* ``KeyHashPartitioner``: Kafka's default — hash the key; keyless records stick to one partition until the producer
  starts a new batch (KIP-480), then move on.
* ``RoundRobinPartitioner``: Java's RoundRobinPartitioner — a per-topic counter over the available partitions.
* ``UniformStickyPartitioner``: every record (keyed or not) sticks to a partition until a batch is full or the linger
  has passed, then switches to another (KIP-480 / KIP-794 spirit); time and randomness are injectable.
* ``PowerUserPartitioner``: the seed's custom partitioner — one key pinned to the last partition, all others hashed
  over the remaining ``n - 1``.

The event feed is keyed by group id through the default rule, so one group's events stay in order in one partition.
"""

from __future__ import annotations

import random
import time
from typing import Callable

from kafka.partitioner import Partitioner

from assignors.java import kafka_abs, murmur2, to_positive


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Where Kafka's default partitioner puts a keyed record."""
    return to_positive(murmur2(key)) % num_partitions


def _partitions(cluster, topic: str) -> tuple[list[int], list[int]]:
    all_partitions = sorted(cluster.partitions_for_topic(topic) or [])
    if not all_partitions:
        raise ValueError(f"no partitions known for topic {topic!r}")
    available = sorted(cluster.available_partitions_for_topic(topic) or []) or all_partitions
    return all_partitions, available


class KeyHashPartitioner(Partitioner):
    """Kafka's default: murmur2 of the key over all partitions; keyless records are sticky."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self.sticky: dict[str, int] = {}

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster) -> int:
        all_partitions, available = _partitions(cluster, topic)
        if serialized_key is not None:
            return all_partitions[partition_for_key(serialized_key, len(all_partitions))]
        if topic not in self.sticky or self.sticky[topic] not in all_partitions:
            self.sticky[topic] = self.rng.choice(available)
        return self.sticky[topic]

    def on_new_batch(self, topic, cluster, prev_partition) -> None:
        # Kafka's StickyPartitionCache moves only when the batch that filled is the sticky partition's: a stale call
        # (another thread already moved it) changes nothing.
        if self.sticky.get(topic, prev_partition) != prev_partition:
            return
        _, available = _partitions(cluster, topic)
        others = [p for p in available if p != prev_partition] or available
        self.sticky[topic] = self.rng.choice(others)


class RoundRobinPartitioner(Partitioner):
    """Java's RoundRobinPartitioner: ``toPositive(counter++) % available`` per topic, keys ignored.

    A keyless send that would open a new batch is partitioned twice by the producer (once, aborted, then again after
    ``on_new_batch``). Like Kafka's fix for KAFKA-9965, the aborted pick is remembered and handed out again, so the
    counter advances once per record and no partition is skipped.
    """

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.repick: dict[str, list[int]] = {}

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster) -> int:
        _, available = _partitions(cluster, topic)
        queued = self.repick.get(topic)
        if queued:
            return queued.pop(0)
        n = self.counters.get(topic, 0)
        self.counters[topic] = (n + 1) & 0xFFFFFFFF  # Java int overflow; toPositive keeps the low 31 bits
        return available[to_positive(n) % len(available)]

    def on_new_batch(self, topic, cluster, prev_partition) -> None:
        self.repick.setdefault(topic, []).append(prev_partition)


class UniformStickyPartitioner(Partitioner):
    """All records stick to one partition until ``batch_size`` bytes went there or ``linger_ms`` passed."""

    def __init__(
        self,
        batch_size: int = 16_384,
        linger_ms: int = 5,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size, self.linger_ms = batch_size, linger_ms
        self.rng, self.clock = rng or random.Random(), clock
        self.current: dict[str, tuple[int, int, float]] = {}  # topic -> (partition, bytes so far, since)

    def choose(self, topic: str, partitions: list[int], record_bytes: int) -> int:
        now = self.clock()
        current = self.current.get(topic)
        if (
            current is None
            or current[0] not in partitions
            or current[1] >= self.batch_size
            or (now - current[2]) * 1000 >= self.linger_ms
        ):
            previous = current[0] if current else None
            candidates = [p for p in partitions if p != previous] or partitions
            current = (self.rng.choice(candidates), 0, now)
        partition, size, since = current
        self.current[topic] = (partition, size + record_bytes, since)
        return partition

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster) -> int:
        _, available = _partitions(cluster, topic)
        size = len(serialized_key or b"") + len(serialized_value or b"")
        return self.choose(topic, available, size)

    def on_new_batch(self, topic, cluster, prev_partition) -> None:
        """The producer had to open a new batch: the old one is on its way, so move to another partition now --
        unless the sticky partition has moved on from ``prev_partition`` already."""
        current = self.current.get(topic)
        if current is not None and current[0] != prev_partition:
            return
        _, available = _partitions(cluster, topic)
        candidates = [p for p in available if p != prev_partition] or available
        self.current[topic] = (self.rng.choice(candidates), 0, self.clock())


class InvalidRecord(ValueError):
    pass


class PowerUserPartitioner(Partitioner):
    """Seed 002's custom partitioner: ``power_key`` always lands on the last partition; every other key is hashed
    over the first ``n - 1`` partitions, so the power user never shares a partition."""

    def __init__(self, power_key: str = "CEO") -> None:
        self.power_key = power_key

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster) -> int:
        all_partitions, _ = _partitions(cluster, topic)
        if serialized_key is None or not isinstance(key, (str, bytes)):
            raise InvalidRecord("records must have a string key")
        text = key.decode("utf-8") if isinstance(key, bytes) else key
        n = len(all_partitions)
        if text == self.power_key or n == 1:
            return all_partitions[-1]
        # The seed's Math.abs(murmur2(key)) % (n - 1), except for the one hash Math.abs leaves negative
        # (Integer.MIN_VALUE, which would name a negative partition): that key goes to partition 0, as Utils.abs has it.
        return all_partitions[kafka_abs(murmur2(serialized_key)) % (n - 1)]
