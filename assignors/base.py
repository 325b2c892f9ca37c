"""Core types shared by every assignor, plus helpers that reproduce Java's orderings.

Kafka's assignors are written in Java, and a few of their answers depend on how Java orders things:
``String.compareTo`` compares UTF-16 code units, and ``HashMap``/``HashSet`` iterate in bucket order.
The helpers here let the Python ports give byte-for-byte the same answer.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

EAGER = "eager"
COOPERATIVE = "cooperative"


class TopicPartition(NamedTuple):
    """A partition of a topic; tuples order by topic, then partition (Kafka's PARTITION_COMPARATOR)."""

    topic: str
    partition: int


@dataclass(frozen=True)
class Subscription:
    """What one member sends in JoinGroup (ConsumerProtocolSubscription v3).

    ``generation`` is the generation in which ``owned_partitions`` were owned (None = unknown / -1).
    """

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int | None = None
    group_instance_id: str | None = None
    rack: str | None = None
    user_data: bytes | None = None

    def __init__(
        self,
        topics: Iterable[str],
        owned_partitions: Iterable[tuple[str, int]] = (),
        generation: int | None = None,
        group_instance_id: str | None = None,
        rack: str | None = None,
        user_data: bytes | None = None,
    ) -> None:
        # Normalise plain tuples/lists so callers may pass [["t", 0]] straight from JSON.
        object.__setattr__(self, "topics", tuple(topics))
        object.__setattr__(
            self, "owned_partitions", tuple(TopicPartition(t, int(p)) for t, p in owned_partitions)
        )
        object.__setattr__(self, "generation", None if generation is None or generation < 0 else generation)
        object.__setattr__(self, "group_instance_id", group_instance_id)
        object.__setattr__(self, "rack", rack)
        object.__setattr__(self, "user_data", user_data)


Assignment = dict[str, list[TopicPartition]]
PartitionRacks = Mapping[TopicPartition, "set[str] | frozenset[str]"]


class Assignor(ABC):
    """A partition assignor: pure function from (metadata, subscriptions) to an assignment.

    Subclasses set ``name`` (the protocol name members advertise) and ``supported_protocols``.
    """

    name: str = ""
    supported_protocols: tuple[str, ...] = (EAGER,)

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Return ``{member_id: [TopicPartition, ...]}`` with every member present."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


# ---------------------------------------------------------------------------------------------------------------
# Java orderings
# ---------------------------------------------------------------------------------------------------------------


def _needs_utf16(values: Iterable[str]) -> bool:
    return any(any(ord(c) > 0xFFFF for c in v) for v in values)


def java_sorted(values: Iterable[str]) -> list[str]:
    """Sort strings the way ``Collections.sort``/``TreeSet`` would in Java."""
    items = list(values)
    if _needs_utf16(items):
        return sorted(items, key=lambda s: s.encode("utf-16-be"))
    return sorted(items)


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, str | bytes]:
    """Kafka's ``MemberInfo.compareTo``: static members (by group.instance.id) first, then dynamic by member id."""
    if group_instance_id is not None:
        return (0, group_instance_id.encode("utf-16-be"))
    return (1, member_id.encode("utf-16-be"))


def sorted_members(subscriptions: Mapping[str, Subscription], members: Iterable[str] | None = None) -> list[str]:
    """Member ids in Kafka's MemberInfo order (``Utils.sorted(memberInfoList)``)."""
    ids = subscriptions.keys() if members is None else members
    return sorted(ids, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))


def java_string_hash(value: str) -> int:
    """``String.hashCode()`` as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(value):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(value: str) -> Iterable[int]:
    if value.isascii():
        return value.encode("ascii")
    data = value.encode("utf-16-be")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def java_topic_partition_hash(tp: TopicPartition, topic_hash: int | None = None) -> int:
    """``org.apache.kafka.common.TopicPartition.hashCode()``: 31 * (31 + partition) + topic.hashCode()."""
    th = java_string_hash(tp.topic) if topic_hash is None else topic_hash
    h = (31 * (31 + tp.partition) + th) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return max(n, 1)


def java_hash_order(keys: Iterable, hash_fn, initial_capacity: int | None = None) -> list:
    """Iteration order of a ``java.util.HashMap``/``HashSet`` after inserting ``keys`` in this order.

    HashMap iterates buckets in index order; a bucket keeps insertion order, and resizing splits buckets
    without reordering, so the final order is (bucket index in the final table, insertion position).
    ``initial_capacity`` mirrors ``new HashMap<>(n)``; None means the default constructor (16).
    Repeated keys keep their first position, like ``put`` on an existing key.  Tree bins (9+ colliding keys
    in one bucket of a 64+ table) are not modelled; with real hashes they practically never occur.
    """
    seen: dict = {}
    for key in keys:
        if key not in seen:
            seen[key] = hash_fn(key)
    size = len(seen)
    cap = 16 if initial_capacity is None else _table_size_for(max(initial_capacity, 1))
    while size > cap * 0.75:
        cap <<= 1
    mask = cap - 1

    def bucket(h: int) -> int:
        h &= 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    # sorted() is stable, so equal buckets stay in insertion order.
    return sorted(seen, key=lambda k: bucket(seen[k]))


def java_hashset_capacity_from_collection(n: int) -> int:
    """``new HashSet<>(collection)`` sizes its table as max(n / .75 + 1, 16)."""
    return max(int(n / 0.75) + 1, 16)


def sorted_assignment(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    """Every member's list sorted by (topic, partition)."""
    return {member: sorted(parts) for member, parts in assignment.items()}
