"""Java's String.hashCode and HashMap iteration order, where Kafka's result depends on them."""
from __future__ import annotations

from typing import Iterable, TypeVar

K = TypeVar("K")


def string_hash(s: str) -> int:
    """``String.hashCode``: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def hashmap_order(keys_in_insertion_order: Iterable[str]) -> list[str]:
    """The order a ``java.util.HashMap<String, ?>`` built by inserting these keys iterates them.

    Buckets ascend by ``(h ^ h >>> 16) & (capacity - 1)``; a bucket keeps insertion order. Capacity starts at 16
    and doubles whenever the size passes 3/4 of it. (Tree bins only form at 8+ collisions in one bucket, which
    changes nothing for iteration order of the small maps we model.)
    """
    keys = list(dict.fromkeys(keys_in_insertion_order))
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=lambda k: bucket(k))  # sorted() is stable: insertion order within a bucket
