"""Which ``__consumer_offsets`` partition holds a group: ``Utils.abs(groupId.hashCode()) % partitions``."""

from __future__ import annotations

from assignors.java import java_string_hash, kafka_abs


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
