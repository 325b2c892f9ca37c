"""Use any of our assignors as a kafka-python ``partition_assignment_strategy``.

    from kafka import KafkaConsumer
    from assignors.kafka_python import kafka_python_strategy

    KafkaConsumer("orders", group_id="g", partition_assignment_strategy=[kafka_python_strategy("sticky")])

Each consumer instantiates the returned class, so the per-member state Kafka keeps (last assignment and
generation, needed by the sticky assignors) lives in that instance.  Members advertise a
ConsumerProtocolSubscription v3 (owned partitions, generation, rack), the same bytes a Java consumer sends, so
Java and Python members can share a group.  For ``sticky`` the owned partitions also travel in Java's
StickyAssignor user-data format, which is where Java's eager StickyAssignor looks for them (and the only place the
leader reads them from, as Java's does); ``cooperative-sticky`` puts its generation in the user data as Java's does,
for members whose subscription version carries none.

Not covered: replica racks for KIP-881 (kafka-python's metadata has no rack per replica), so Range and the
sticky assignors run without rack matching here; the consumer's own rack is still advertised.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .base import COOPERATIVE, EAGER, Assignor, Subscription, TopicPartition
from .registry import get_assignor

_PROTOCOLS = {EAGER: RebalanceProtocol.EAGER, COOPERATIVE: RebalanceProtocol.COOPERATIVE}
DEFAULT_GENERATION = -1  # what Kafka's sticky assignors take for a generation they cannot read


# ---- Java StickyAssignor user data (STICKY_ASSIGNOR_USER_DATA_V1) ---------------------------------------------


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int | None) -> bytes:
    """[topic STRING, partitions [INT32]] array, then the generation INT32 (Kafka's V1 schema)."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    out = [struct.pack(">i", len(by_topic))]
    for topic, parts in by_topic.items():
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)))
        out.append(struct.pack(f">{len(parts)}i", *parts))
    out.append(struct.pack(">i", -1 if generation is None else generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    """Inverse of :func:`encode_sticky_user_data`; V0 (no generation) gives None; garbage gives None overall."""
    try:
        pos = 0
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        partitions: list[TopicPartition] = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos : pos + length].decode()
            pos += length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            partitions.extend(TopicPartition(topic, p) for p in struct.unpack_from(f">{n}i", data, pos))
            pos += 4 * n
        generation = struct.unpack_from(">i", data, pos)[0] if len(data) >= pos + 4 else None
        return partitions, generation
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


# ---- adapter ----------------------------------------------------------------------------------------------------


class _Adapter(AbstractPartitionAssignor):
    """Base of the generated strategy classes; subclasses set ``name`` and ``_factory``."""

    name = "abstract"
    version = 3
    _factory: Callable[[], Assignor]
    _user_data: bytes | None = None
    _rack: str | None = None

    def __init__(self) -> None:
        self.assignor = self._factory()
        self.owned: list[TopicPartition] = []
        self.generation: int | None = None

    def supported_protocols(self):
        # kafka-python prefers the highest protocol every configured assignor supports
        return sorted(_PROTOCOLS[p] for p in self.assignor.supported_protocols)

    def metadata(self, topics):
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(self.owned):
            by_topic.setdefault(topic, []).append(p)
        user_data = self._user_data
        if self.name == "sticky" and user_data is None and self.generation is not None:
            user_data = encode_sticky_user_data(self.owned, self.generation)
        elif self.name == "cooperative-sticky" and user_data is None:
            # CooperativeStickyAssignor.subscriptionUserData: the generation, for leaders reading v0/v1 subscriptions
            user_data = struct.pack(">i", -1 if self.generation is None else self.generation)
        return ConsumerProtocolSubscription(
            version=self.version,
            topics=sorted(topics),
            user_data=user_data,
            owned_partitions=[
                ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
            generation_id=-1 if self.generation is None else self.generation,
            rack_id=self._rack,
        )

    def on_assignment(self, assignment, generation):
        self.owned = [TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()]
        self.generation = generation

    def assign(self, cluster, members):
        subscriptions = {member.member_id: self._subscription(member) for member in members}
        topics: dict[str, int] = {}
        for sub in subscriptions.values():
            for topic in sub.topics:
                partitions = cluster.partitions_for_topic(topic)
                if partitions:
                    topics[topic] = len(partitions)
        result = self.assignor.assign(topics, subscriptions)
        out = {}
        for member_id in subscriptions:
            by_topic: dict[str, list[int]] = {}
            for topic, p in result.get(member_id, ()):
                by_topic.setdefault(topic, []).append(p)
            out[member_id] = ConsumerProtocolAssignment(0, sorted(by_topic.items()), b"")
        return out

    def _subscription(self, member) -> Subscription:
        meta = member.metadata
        owned = [
            TopicPartition(tp.topic, p) for tp in (getattr(meta, "owned_partitions", None) or ()) for p in tp.partitions
        ]
        generation = getattr(meta, "generation_id", -1)
        user_data = getattr(meta, "user_data", None)
        if self.name == "sticky":
            # Java's eager StickyAssignor.memberData reads owned partitions and generation from its user data only:
            # none without it, none and generation -1 when it cannot be read.
            owned, generation = [], None
            if user_data:
                owned, generation = decode_sticky_user_data(bytes(user_data)) or ([], DEFAULT_GENERATION)
        elif self.name == "cooperative-sticky" and (generation is None or generation < 0):
            # CooperativeStickyAssignor.memberData: a subscription without a generation (v0/v1) has it in the user
            # data, an INT32; none without user data, -1 when it cannot be read.
            generation = None
            if user_data is not None:
                data = bytes(user_data)
                generation = struct.unpack_from(">i", data)[0] if len(data) >= 4 else DEFAULT_GENERATION
        return Subscription(
            list(meta.topics),
            owned,
            generation,
            group_instance_id=getattr(member, "group_instance_id", None),
            rack=getattr(meta, "rack_id", None),
            user_data=bytes(user_data) if user_data is not None else None,
        )


def kafka_python_strategy(
    assignor: str | Assignor | type[Assignor],
    *,
    user_data: bytes | None = None,
    rack: str | None = None,
) -> type[AbstractPartitionAssignor]:
    """A kafka-python assignor class running ``assignor`` (a registered name, an Assignor class or instance).

    ``user_data`` is what this member advertises (e.g. ``encode_priority(5)`` for priority-failover);
    ``rack`` is the consumer's rack (``client.rack``).
    """
    if isinstance(assignor, str):
        name, factory = assignor, (lambda: get_assignor(assignor))
    elif isinstance(assignor, Assignor):
        name, factory = assignor.name, (lambda: assignor)
    else:
        name, factory = assignor.name, assignor
    attrs = {
        "name": name,
        "_factory": staticmethod(factory),
        "_user_data": user_data,
        "_rack": rack,
    }
    class_name = "".join(part.capitalize() for part in name.replace("_", "-").split("-")) + "KafkaPythonAssignor"
    return type(class_name, (_Adapter,), attrs)
