"""Kafka's RoundRobinAssignor.

All subscribed partitions, sorted by topic then partition, are dealt to the members in MemberInfo order;
a member not subscribed to a partition's topic is skipped (without losing its turn for later partitions of
other topics -- the cursor simply moves on, exactly as Kafka's CircularIterator does).
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription, TopicPartition, sorted_members
from .java import java_sorted


class RoundRobinAssignor(Assignor):
    name = "roundrobin"
    supported_protocols = (EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        ring = sorted_members(subscriptions)
        if not ring:
            return assignment
        topic_sets = {m: frozenset(subscriptions[m].topics) for m in ring}
        topics = java_sorted({t for s in subscriptions.values() for t in s.topics})
        cursor, n = 0, len(ring)
        for topic in topics:
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            for p in range(count):
                # some member subscribes to every topic in this union, so the scan always ends
                while topic not in topic_sets[ring[cursor]]:
                    cursor = (cursor + 1) % n
                assignment[ring[cursor]].append(TopicPartition(topic, p))
                cursor = (cursor + 1) % n
        return assignment
