"""Java's and Kafka's answers where Kafka's behaviour depends on them, computed once for the whole project.

* ``java_string_hash``: ``String.hashCode``; ``java_sorted``, ``java_string_order_key``: ``String.compareTo``
  order (UTF-16 code units).
* ``java_hash_order``, ``JavaHashSet``: the iteration order of a ``java.util.HashMap``/``HashSet`` (Kafka's leader
  choice, member lists, protocol-vote ties, the assignors' tie-breaks); ``java_hashset_capacity_from_collection``
  sizes ``new HashSet<>(c)``.
* Kafka's ``TopicPartition.hashCode`` and ``Utils.abs``, ``Utils.toPositive``, ``Utils.murmur2``.

Each is checked against a JVM: ``tests/core/test_javahash_jvm.py`` (``String.hashCode`` and ``HashMap`` order, with and
without an initial capacity) and ``tests/core/test_java_hashes_kafka_oracle.py`` (Kafka's own classes).

It lives in ``assignors/``, the lowest layer, which imports nothing else of this project: the assignors, the
coordinators (``streaming/coordinator``), the ``__consumer_offsets`` partitioning (``offsets_store``) and the producer
partitioners (``streaming/feeds``) all sit above it, so each can use this one copy without an import cycle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from functools import lru_cache
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

INT_MIN = -(2**31)


def _signed32(h: int) -> int:
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# ------------------------------------------------------------------ String
def java_string_hash(value: str) -> int:
    """``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(value):
        h = (31 * h + unit) & 0xFFFFFFFF
    return _signed32(h)


def _utf16_units(value: str) -> Iterable[int]:
    if value.isascii():
        return value.encode("ascii")
    data = value.encode("utf-16-be")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


@lru_cache(maxsize=1 << 16)
def _cached_string_hash(value: str) -> int:
    """The default key hash of ``java_hash_order``: the coordinators ask for the same member ids over and over."""
    return java_string_hash(value)


def java_string_order_key(strings: Iterable[str]) -> Callable[[str], str | bytes]:
    """A sort key giving ``String.compareTo`` order among these strings: UTF-16 code units, which differ from Python's
    code-point order only when one of them lies above U+FFFF (then the key is its UTF-16 bytes)."""
    if any(any(ord(c) > 0xFFFF for c in s) for s in strings):
        return lambda s: s.encode("utf-16-be")
    return lambda s: s


def java_sorted(values: Iterable[str]) -> list[str]:
    """Sort strings the way ``Collections.sort``/``TreeSet`` would in Java."""
    items = list(values)
    return sorted(items, key=java_string_order_key(items))


# ------------------------------------------------------------------ HashMap / HashSet
TREEIFY_THRESHOLD = 8  # a bucket's 9th key turns it into a tree bin ...
MIN_TREEIFY_CAPACITY = 64  # ... only in a table this big; a smaller one doubles instead


def java_hash_order(
    keys: Iterable[K], hash_fn: Callable[[K], int] | None = None, initial_capacity: int | None = None
) -> list[K]:
    """Iteration order of a ``java.util.HashMap``/``HashSet`` after inserting ``keys`` in this order (see
    ``JavaHashSet``). ``hash_fn``: the keys' ``hashCode()`` (default: ``String.hashCode``); ``initial_capacity``
    mirrors ``new HashMap<>(n)``, None the default constructor. Repeated keys keep their first position, like ``put``
    on an existing key."""
    table = JavaHashSet(hash_fn, initial_capacity)
    for key in keys:
        table.add(key)
    return list(table)


class JavaHashSet(Generic[K]):
    """The keys of a ``java.util.HashMap`` (a ``HashSet``) as they come and go, in the order Java iterates them.

    HashMap iterates its buckets in index order, ``(h ^ h >>> 16) & (capacity - 1)``; a bucket keeps insertion order,
    and a resize splits buckets without reordering them, so the order is (bucket in the current table, insertion
    position). The table doubles when its size passes 3/4 of it, and when a bucket already holding 8 keys gets
    another while the table is smaller than 64 (HashMap resizes there instead of making a tree bin); it never
    shrinks. Not modelled: a tree bin's own order (9+ keys in one bucket of a table of 64 or more; not met with real
    member ids or partitions).
    """

    __slots__ = ("_hash", "_entries", "_added", "_capacity", "_buckets")

    def __init__(self, hash_fn: Callable[[K], int] | None = None, initial_capacity: int | None = None) -> None:
        self._hash = hash_fn or _cached_string_hash
        self._entries: dict[K, tuple[int, int]] = {}  # key -> (spread hash, insertion number)
        self._added = 0
        self._capacity = 16 if initial_capacity is None else _table_size_for(initial_capacity)
        self._buckets: Counter[int] = Counter()  # keys per bucket, while the table is small enough to grow for one

    def add(self, key: K) -> None:
        if key in self._entries:
            return
        h = self._hash(key) & 0xFFFFFFFF
        h ^= h >> 16
        if self._capacity < MIN_TREEIFY_CAPACITY:
            if self._buckets[h & (self._capacity - 1)] >= TREEIFY_THRESHOLD:
                self._grow()
            self._buckets[h & (self._capacity - 1)] += 1
        self._entries[key] = (h, self._added)
        self._added += 1
        if len(self._entries) > self._capacity * 3 // 4:  # HashMap's threshold: (int) (capacity * 0.75f)
            self._grow()

    def discard(self, key: K) -> None:
        if key in self._entries:
            self.remove(key)

    def remove(self, key: K) -> None:
        h, _ = self._entries.pop(key)
        if self._capacity < MIN_TREEIFY_CAPACITY:
            self._buckets[h & (self._capacity - 1)] -= 1

    def _grow(self) -> None:
        self._capacity *= 2
        self._buckets = (
            Counter(h & (self._capacity - 1) for h, _ in self._entries.values())
            if self._capacity < MIN_TREEIFY_CAPACITY
            else Counter()
        )

    def _position(self) -> Callable[[K], tuple[int, int]]:
        mask, entries = self._capacity - 1, self._entries
        return lambda key: (entries[key][0] & mask, entries[key][1])

    def first(self) -> K:
        """What ``iterator().next()`` returns."""
        return min(self._entries, key=self._position())

    def __iter__(self) -> Iterator[K]:
        return iter(sorted(self._entries, key=self._position()))

    def __len__(self) -> int:
        return len(self._entries)


# ------------------------------------------------------------------ Kafka's TimelineHashMap
TIMELINE_MIN_CAPACITY = 2


def timeline_capacity_after_adding(capacity: int, size: int) -> int:
    """The table of Kafka's ``BaseHashTable`` (``TimelineHashMap``, ``TimelineHashSet``) after adding an element to
    ``size`` others: it doubles when (size + 1) * 0.75 passes the table's length, and never shrinks."""
    while (size + 1) * 0.75 > capacity:
        capacity *= 2
    return capacity


def timeline_hash_order(
    keys: Iterable[K], capacity: int = TIMELINE_MIN_CAPACITY, hash_fn: Callable[[K], int] | None = None
) -> list[K]:
    """Iteration order of a Kafka ``TimelineHashMap`` (``BaseHashTable``) after adding ``keys`` in this order to an
    empty table of ``capacity`` slots (it grows as it fills, see ``timeline_capacity_after_adding``). A key's slot
    is the top bits of its ``hashCode()`` times -7046029254386353131 (Knuth's multiplicative hashing), as many bits
    as the table needs; a slot keeps its keys in the order they came (growth re-adds them slot by slot); iteration
    goes through the slots in index order and through each slot's keys from the last to the first."""
    hash_fn = hash_fn or _cached_string_hash

    def slot(key: K, size: int) -> int:
        product = (_signed32(hash_fn(key)) * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF
        return product >> (65 - size.bit_length())

    table: list[list[K]] = [[] for _ in range(capacity)]
    size = 0
    for key in keys:
        grown = timeline_capacity_after_adding(len(table), size)
        if grown != len(table):
            old, table = table, [[] for _ in range(grown)]
            for kept in (k for bucket in old for k in bucket):
                table[slot(kept, grown)].append(kept)
        table[slot(key, len(table))].append(key)
        size += 1
    return [k for bucket in table for k in reversed(bucket)]


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= the capacity asked for (at least 1)."""
    n = 1
    while n < capacity:
        n <<= 1
    return n


def java_hashset_capacity_from_collection(n: int) -> int:
    """``new HashSet<>(collection)`` sizes its table as max(n / .75 + 1, 16) -- up to Java 18. (Java 19 on sizes it
    ``HashMap.newHashMap(max(n, 12))``, a smaller table for some sizes, e.g. 16 rather than 32 for 12 elements, so
    the order of such a set depends on the JVM Kafka runs on; this is Java 17's.)"""
    return max(int(n / 0.75) + 1, 16)


# ------------------------------------------------------------------ Kafka's classes
class _TopicPartition(Protocol):
    topic: str
    partition: int


def java_topic_partition_hash(tp: _TopicPartition, topic_hash: int | None = None) -> int:
    """``org.apache.kafka.common.TopicPartition.hashCode()``: 31 * (31 + partition) + topic.hashCode()."""
    th = java_string_hash(tp.topic) if topic_hash is None else topic_hash
    return _signed32(31 * (31 + tp.partition) + th)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs``, except that ``Integer.MIN_VALUE`` (which ``Math.abs`` leaves negative)
    maps to 0."""
    return 0 if n == INT_MIN else abs(n)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: drop the sign bit (not ``abs``: ``Integer.MIN_VALUE`` maps to 0)."""
    return n & 0x7FFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: seed 0x9747b28c, returned as a signed int."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _signed32(h)
