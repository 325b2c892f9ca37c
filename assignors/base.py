"""Core types shared by every assignor, and Kafka's member order.

Java's own orderings and hashes (``String.compareTo``, ``String.hashCode``, ``HashMap`` order), which some of
Kafka's answers depend on, are in ``assignors/java.py``.
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
        object.__setattr__(self, "owned_partitions", tuple(TopicPartition(t, int(p)) for t, p in owned_partitions))
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
# Kafka's member order
# ---------------------------------------------------------------------------------------------------------------


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, str | bytes]:
    """Kafka's ``MemberInfo.compareTo``: static members (by group.instance.id) first, then dynamic by member id."""
    if group_instance_id is not None:
        return (0, group_instance_id.encode("utf-16-be"))
    return (1, member_id.encode("utf-16-be"))


def sorted_members(subscriptions: Mapping[str, Subscription], members: Iterable[str] | None = None) -> list[str]:
    """Member ids in Kafka's MemberInfo order (``Utils.sorted(memberInfoList)``)."""
    ids = subscriptions.keys() if members is None else members
    return sorted(ids, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))


def sorted_assignment(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    """Every member's list sorted by (topic, partition)."""
    return {member: sorted(parts) for member, parts in assignment.items()}
