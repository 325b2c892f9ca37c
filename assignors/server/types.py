"""Inputs and outputs of the server-side (KIP-848) assignors, after Kafka's ``group-coordinator-api``.

Kafka's broker computes a consumer group's *target assignment* itself from

* ``GroupSpec``: the members (``MemberSubscription``: subscribed topic ids, optional rack and instance id) with
  their current target assignment, the subscription type (homogeneous when every member subscribes to the same
  topics) and the reverse lookup partition -> current owner;
* ``SubscribedTopicDescriber``: partition count (and replica racks) per topic id.

The answer (``GroupAssignment``) is, per member, topic id -> set of partitions.

Here a topic id is a string.  Kafka's ids are ``Uuid``s printed in URL-safe base64 (22 characters, e.g.
``"T1-A4s3VTwiI5CTbEp6POw"``); such strings are hashed and compared as Kafka hashes and compares the ``Uuid``
(``uuid_hash``, ``uuid_sort_key``), so iteration orders -- and therefore tie breaks -- match Kafka's.  Any other
string is accepted too (hashed like a Java String, compared as text).  Members may also subscribe by topic name;
names are resolved to ids through the topic metadata and names without metadata are dropped, as Kafka's
``TopicIds`` does.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..java import java_string_hash

_URL_SAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]*={0,2}")

HOMOGENEOUS = "Homogeneous"
HETEROGENEOUS = "Heterogeneous"

GroupAssignment = dict[str, dict[str, frozenset[int]]]
"""member id -> topic id -> partitions (Kafka's ``GroupAssignment``: member -> ``MemberAssignment``)."""


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException`` (e.g. a member subscribed to a topic id without metadata)."""


# ---------------------------------------------------------------------------------------------------------------
# Kafka's Uuid: ordering and hashing
# ---------------------------------------------------------------------------------------------------------------


def parse_uuid(value: str) -> tuple[int, int] | None:
    """``Uuid.fromString``: URL-safe base64 of 16 bytes -> (most, least) significant bits as signed longs.

    Returns None for a string that is not a Kafka Uuid.
    """
    # Java's URL-safe decoder: no '+' or '/' (b64decode with altchars would take them too); padding optional,
    # but when present it must complete the last group of four.
    if (
        not isinstance(value, str)
        or len(value) > 24
        or not _URL_SAFE_BASE64.fullmatch(value)
        or ("=" in value and len(value) % 4)
    ):
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16:
        return None
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)


def uuid_hash(topic_id: str) -> int:
    """``Uuid.hashCode()`` for a Kafka Uuid string, ``String.hashCode()`` otherwise (signed 32-bit)."""
    bits = parse_uuid(topic_id)
    if bits is None:
        return java_string_hash(topic_id)
    x = (bits[0] ^ bits[1]) & 0xFFFFFFFFFFFFFFFF
    h = ((x >> 32) ^ x) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def uuid_sort_key(topic_id: str) -> tuple:
    """``Uuid.compareTo`` order (most, then least significant bits, signed); other strings after, as text."""
    bits = parse_uuid(topic_id)
    return (0, bits[0], bits[1], "") if bits is not None else (1, 0, 0, topic_id)


# ---------------------------------------------------------------------------------------------------------------
# Topic metadata
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicMetadata:
    """One topic as the coordinator knows it (Kafka's ``modern.TopicMetadata``).

    ``partition_racks`` (partition -> replica racks) is the rack information Kafka's ``SubscribedTopicDescriber``
    interface offers.  Kafka's server-side assignors no longer read it (rack awareness was removed from them in
    KAFKA-16694 and the racks from the metadata in KAFKA-17578); it is carried so a describer can answer
    ``racks_for_partition`` and a future rack-aware assignor has its input.
    """

    topic_id: str
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.topic_id or self.topic_id == "AAAAAAAAAAAAAAAAAAAAAA":
            raise ValueError("Topic id cannot be empty or ZERO_UUID.")
        if not self.name:
            raise ValueError("Topic name cannot be empty.")
        if self.num_partitions < 0:
            raise ValueError("Number of partitions cannot be negative.")
        object.__setattr__(
            self, "partition_racks", {int(p): frozenset(r) for p, r in dict(self.partition_racks).items()}
        )


class SubscribedTopicDescriber:
    """Kafka's ``SubscribedTopicDescriber``: partition counts and replica racks per topic id.

    Built from ``TopicMetadata`` objects (or a mapping topic id -> ``TopicMetadata``).
    """

    def __init__(self, topics: Iterable[TopicMetadata] | Mapping[str, TopicMetadata] = ()) -> None:
        items = topics.values() if isinstance(topics, Mapping) else topics
        self.topics: dict[str, TopicMetadata] = {t.topic_id: t for t in items}
        self._ids_by_name = {t.name: t.topic_id for t in self.topics.values()}

    def num_partitions(self, topic_id: str) -> int:
        """The partition count, or -1 if the topic id does not exist."""
        topic = self.topics.get(topic_id)
        return -1 if topic is None else topic.num_partitions

    def racks_for_partition(self, topic_id: str, partition: int) -> frozenset[str]:
        """Replica racks of a partition as given in its ``TopicMetadata`` (empty if unknown)."""
        topic = self.topics.get(topic_id)
        return frozenset() if topic is None else topic.partition_racks.get(partition, frozenset())

    def topic_id(self, name: str) -> str | None:
        """Resolve a topic name (Kafka's ``TopicResolver``); None if no such topic."""
        return self._ids_by_name.get(name)


# ---------------------------------------------------------------------------------------------------------------
# Members and the group
# ---------------------------------------------------------------------------------------------------------------


def _partitions(value: Iterable[int]) -> tuple[int, ...]:
    """A member's partitions of one topic, in iteration order; sets are taken in ascending order."""
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(int(p) for p in value))
    return tuple(dict.fromkeys(int(p) for p in value))


@dataclass(frozen=True)
class MemberSubscription:
    """One member: Kafka's ``MemberSubscription`` plus its current target assignment
    (``MemberSubscriptionAndAssignmentImpl``).

    ``topic_ids`` and ``topic_names`` are both subscriptions (names are resolved by ``GroupSpec``).  ``assignment``
    maps topic id -> partitions currently assigned to the member in the group's target assignment; it is iterated
    in the given order (the homogeneous builder's revocations depend on it, as in Kafka).
    """

    topic_ids: tuple[str, ...] = ()
    rack: str | None = None
    instance_id: str | None = None
    assignment: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    topic_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic_ids", tuple(dict.fromkeys(self.topic_ids)))
        object.__setattr__(self, "topic_names", tuple(dict.fromkeys(self.topic_names)))
        object.__setattr__(
            self, "assignment", {t: _partitions(ps) for t, ps in dict(self.assignment).items() if _partitions(ps)}
        )


class GroupSpec:
    """Kafka's ``GroupSpec`` (``GroupSpecImpl``): members in iteration order, subscription type, current owners.

    ``members`` is iterated in the given order, which is the order Kafka's builders visit members in; Kafka's
    own tests use sorted member ids (a ``TreeMap``), so pass a sorted mapping to reproduce their tie breaks.
    Topic names in subscriptions are resolved with ``topics`` (names it does not know are dropped).
    ``subscription_type`` defaults to Kafka's rule (``ModernGroup.subscriptionType``): homogeneous when every
    subscribed topic is subscribed by every member.
    """

    def __init__(
        self,
        members: Mapping[str, MemberSubscription],
        topics: SubscribedTopicDescriber | None = None,
        subscription_type: str | None = None,
    ) -> None:
        resolved: dict[str, MemberSubscription] = {}
        counts: dict[str, int] = {}
        for member_id, sub in members.items():
            ids = list(sub.topic_ids)
            for name in sub.topic_names:
                topic_id = topics.topic_id(name) if topics is not None else None
                if topic_id is not None:
                    ids.append(topic_id)
            if sub.topic_names:
                sub = MemberSubscription(tuple(ids), sub.rack, sub.instance_id, sub.assignment)
            resolved[member_id] = sub
            # Kafka counts subscribers per subscribed topic *name*, resolvable or not
            for key in (*sub.topic_ids, *members[member_id].topic_names):
                counts[key] = counts.get(key, 0) + 1
        self.members = resolved
        if subscription_type is None:
            subscription_type = HOMOGENEOUS if all(c == len(resolved) for c in counts.values()) else HETEROGENEOUS
        if subscription_type not in (HOMOGENEOUS, HETEROGENEOUS):
            raise ValueError(f"subscription type must be {HOMOGENEOUS!r} or {HETEROGENEOUS!r}")
        self.subscription_type = subscription_type
        # Kafka's invertedMemberAssignment: topic id -> partition -> member
        self.owners: dict[str, dict[int, str]] = {}
        for member_id, sub in resolved.items():
            for topic_id, partitions in sub.assignment.items():
                by_partition = self.owners.setdefault(topic_id, {})
                for p in partitions:
                    other = by_partition.setdefault(p, member_id)
                    if other != member_id:
                        raise ValueError(f"partition {topic_id}-{p} is assigned to both {other} and {member_id}")

    @property
    def member_ids(self) -> list[str]:
        return list(self.members)

    def member_subscription(self, member_id: str) -> MemberSubscription:
        try:
            return self.members[member_id]
        except KeyError:
            raise ValueError(f"Member Id {member_id} not found.") from None

    def member_assignment(self, member_id: str) -> Mapping[str, tuple[int, ...]]:
        sub = self.members.get(member_id)
        return {} if sub is None else sub.assignment

    def is_partition_assigned(self, topic_id: str, partition: int) -> bool:
        return partition in self.owners.get(topic_id, {})
