"""Priority-failover assignor (the custom assignor from the seeds).

Every partition goes to the highest-priority live member, so one consumer does all the work and the others
stand by; when it leaves, the next rebalance fails over to the next priority.

Priority encoding in ``Subscription.user_data``: a signed 32-bit big-endian integer (Java's
``ByteBuffer.allocate(4).putInt(priority)``), see :func:`encode_priority`.  Higher wins.  Members whose user
data is missing or not exactly 4 bytes count as the lowest priority (the Java sample would throw instead).
Ties break by Kafka's member order (static members by group.instance.id, then member id).  Each topic goes to
the highest-priority member *subscribed to it*, which is the seed's behaviour when all subscriptions agree and
keeps the result valid when they do not.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription, TopicPartition, sorted_members

NO_PRIORITY = -(2**31) - 1  # below every encodable priority


def encode_priority(priority: int) -> bytes:
    """User data for a member with this priority (4-byte big-endian signed int)."""
    return struct.pack(">i", priority)


def decode_priority(user_data: bytes | None) -> int:
    if user_data is None or len(user_data) != 4:
        return NO_PRIORITY
    return struct.unpack(">i", bytes(user_data))[0]


class PriorityFailoverAssignor(Assignor):
    name = "priority-failover"
    supported_protocols = (EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        # stable sort: equal priorities keep Kafka's member order
        ranked = sorted(sorted_members(subscriptions), key=lambda m: -decode_priority(subscriptions[m].user_data))
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            count = partitions_per_topic.get(topic, 0)
            owner = next((m for m in ranked if topic in subscriptions[m].topics), None)
            if owner is not None and count > 0:
                assignment[owner].extend(TopicPartition(topic, p) for p in range(count))
        return assignment
