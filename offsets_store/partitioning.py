"""Which ``__consumer_offsets`` partition holds a group: ``Utils.abs(groupId.hashCode()) % partitions``."""
from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, wrapped to a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs``, except ``Integer.MIN_VALUE`` (whose ``Math.abs`` stays negative) maps to 0."""
    return 0 if n == -(2**31) else abs(n)


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
