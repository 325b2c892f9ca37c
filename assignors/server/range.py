"""Kafka's server-side ``RangeAssignor`` (KIP-848, ``group.consumer.assignors`` name ``range``).

Not the client-side ``range`` (``assignors.range.RangeAssignor``): this one runs in the group coordinator on a
``GroupSpec``.  Members are ordered static first (by instance id), then dynamic (by member id); each topic's
partitions are cut into contiguous ranges over its subscribers in that order, the first ``partitions % subscribers``
getting one more.  When every member subscribes to the same topics and those topics have the same partition count,
partition ``p`` of every topic lands on the same member (co-partitioning, for joins).

Stickiness: Kafka's server-side range used to keep current partitions within quota, but co-partitioning could not
be kept that way, so KAFKA-16944 (Kafka 3.9) made it recompute the assignment every time.  What stays stable is
what the ordering gives: static members keep their ranges across restarts (their member ids may change, their
instance ids do not), and nothing moves while membership, subscriptions and partition counts stay the same.
The current target assignment in the ``GroupSpec`` is therefore not read.  Racks are not used (as in Kafka).
"""

from __future__ import annotations

from ..base import member_sort_key
from .types import HOMOGENEOUS, GroupAssignment, GroupSpec, PartitionAssignorError, SubscribedTopicDescriber


class _Topic:
    __slots__ = ("topic_id", "num_partitions", "num_members", "min_quota", "extra", "next_range")

    def __init__(self, topic_id: str, num_partitions: int, num_members: int) -> None:
        self.topic_id = topic_id
        self.num_partitions = num_partitions
        self.num_members = num_members
        self.min_quota = -1
        self.extra = -1
        self.next_range = 0

    def take_range(self) -> range:
        """The next member's range (Kafka's ``addPartitionsToAssignment``)."""
        if self.min_quota == -1:
            self.min_quota, self.extra = divmod(self.num_partitions, self.num_members)
        quota = self.min_quota
        if self.extra > 0:
            quota += 1
            self.extra -= 1
        start = self.next_range
        end = min(start + quota, self.num_partitions)
        self.next_range = end
        return range(start, end)


class RangeAssignor:
    """``assign(GroupSpec, SubscribedTopicDescriber) -> GroupAssignment``; every member gets an entry."""

    name = "range"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        if not group_spec.member_ids:
            return {}
        members = sorted(
            group_spec.member_ids, key=lambda m: member_sort_key(m, group_spec.member_subscription(m).instance_id)
        )
        per_topic: dict[str, _Topic] = {}
        if group_spec.subscription_type == HOMOGENEOUS:
            for topic_id in group_spec.member_subscription(members[0]).topic_ids:
                per_topic[topic_id] = _Topic(topic_id, self._count(topics, topic_id), len(members))
        else:
            for member_id in members:
                for topic_id in group_spec.member_subscription(member_id).topic_ids:
                    topic = per_topic.get(topic_id)
                    if topic is None:
                        topic = per_topic[topic_id] = _Topic(topic_id, self._count(topics, topic_id), 0)
                    topic.num_members += 1

        assignment: GroupAssignment = {}
        homogeneous = group_spec.subscription_type == HOMOGENEOUS
        for member_id in members:
            mine: dict[str, frozenset[int]] = {}
            topic_ids = per_topic if homogeneous else group_spec.member_subscription(member_id).topic_ids
            for topic_id in topic_ids:
                partitions = per_topic[topic_id].take_range()
                if partitions:
                    mine[topic_id] = frozenset(partitions)
            assignment[member_id] = mine
        return assignment

    @staticmethod
    def _count(topics: SubscribedTopicDescriber, topic_id: str) -> int:
        n = topics.num_partitions(topic_id)
        if n == -1:
            raise PartitionAssignorError("Member is subscribed to a non-existent topic")
        return n

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
