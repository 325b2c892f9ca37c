"""Java's String.hashCode and HashMap iteration order, where Kafka's result depends on them."""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
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

    Buckets ascend by ``(h ^ h >>> 16) & (capacity - 1)``; a bucket keeps insertion order (a resize splits buckets
    without reordering them). Capacity starts at 16 and doubles when the size passes 3/4 of it, or when a bucket
    already holding 8 keys gets another while the table is smaller than 64 (HashMap resizes instead of making a tree
    bin there). Not modelled: a tree bin's own order (8+ colliding keys at capacity 64+), and a map that shrank --
    Java never shrinks a table, so a map that once held more keys may iterate as a bigger one would.
    """
    keys = list(dict.fromkeys(keys_in_insertion_order))
    spread = [(h ^ (h >> 16)) for h in (_string_hash_cached(k) & 0xFFFFFFFF for k in keys)]
    capacity, buckets = 16, Counter()
    for size, h in enumerate(spread, start=1):
        if buckets[h & (capacity - 1)] >= 8 and capacity < 64:
            capacity *= 2
            buckets = Counter(x & (capacity - 1) for x in spread[:size - 1])
        buckets[h & (capacity - 1)] += 1
        if size > capacity * 3 // 4:
            capacity *= 2
            buckets = Counter(x & (capacity - 1) for x in spread[:size])
    order = sorted(range(len(keys)), key=lambda i: spread[i] & (capacity - 1))   # stable: insertion order kept
    return [keys[i] for i in order]


@lru_cache(maxsize=1 << 16)
def _string_hash_cached(s: str) -> int:
    return string_hash(s)
