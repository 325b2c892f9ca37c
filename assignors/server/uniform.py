"""Kafka's server-side ``UniformAssignor`` (KIP-848, ``group.consumer.assignors`` name ``uniform``).

Balance first, then stickiness to the group's current target assignment.  Two builders, chosen by the group's
subscription type exactly as Kafka chooses them:

* homogeneous (``UniformHomogeneousAssignmentBuilder``): every member subscribes to the same topics.  The total
  partition count is split into a minimum quota and ``total % members`` extra partitions.  In member order, each
  member keeps its current partitions up to the minimum quota plus one while extras remain -- visiting its
  current assignment in order -- and releases the rest and any of topics it no longer subscribes to.  Since Kafka
  4.1 (KAFKA-18688) a member that would need new partitions to fill that extra one gives the extra up, so that a
  later member already holding minimum + 1 keeps its own, unless the members left are only as many as the extras
  left (they must take them); Kafka 4.0 handed the extras to the first members in order, moving partitions
  between members of a group that was already balanced (``UniformAssignor(kafka_4_0=True)``).  Then the members
  below quota, in member order, are filled from the list of unassigned partitions (topics in ``HashSet<Uuid>``
  order, partitions ascending, then the released ones).
* heterogeneous (``UniformHeterogeneousAssignmentBuilder``, the KAFKA-17710 rewrite): every member keeps all its
  current partitions of subscribed topics; unassigned partitions are dealt, topic by topic (most partitions per
  subscriber first, then fewest subscribers, then topic id), to the topic's least loaded subscribers; then, for up
  to 16 passes over the topics, each topic's partitions move from its most loaded subscribers (their highest
  partition first) to its least loaded ones until the topic's subscribers differ by at most one.

Racks: Kafka's server-side assignors are not rack-aware (KAFKA-16694 removed it); member racks and partition
racks are accepted in the inputs and do not change the result, as in Kafka.

Deviation: a current assignment naming a partition beyond the topic's partition count is ignored (Kafka never
sees one, since partition counts only grow; its builders would fail on it).
"""

from __future__ import annotations

from ..java import java_hash_order, java_hashset_capacity_from_collection
from .types import (
    HOMOGENEOUS,
    GroupAssignment,
    GroupSpec,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    uuid_hash,
    uuid_sort_key,
)

MAX_ITERATION_COUNT = 16


def _frozen(assignment: dict[str, list[int] | set[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


class UniformAssignor:
    """``assign(GroupSpec, SubscribedTopicDescriber) -> GroupAssignment``."""

    name = "uniform"

    def __init__(self, *, kafka_4_0: bool = False) -> None:
        #: homogeneous groups as Kafka 4.0 and earlier assigned them (before KAFKA-18688, Kafka 4.1)
        self.kafka_4_0 = kafka_4_0

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        if not group_spec.member_ids:
            return {}
        if group_spec.subscription_type == HOMOGENEOUS:
            return _homogeneous(group_spec, topics, give_up_extra=not self.kafka_4_0)
        return _Heterogeneous(group_spec, topics).build()

    def __repr__(self) -> str:
        version = ", kafka_4_0=True" if self.kafka_4_0 else ""
        return f"{type(self).__name__}(name={self.name!r}{version})"


# ---------------------------------------------------------------------------------------------------------------
# Homogeneous
# ---------------------------------------------------------------------------------------------------------------


def _homogeneous(spec: GroupSpec, topics: SubscribedTopicDescriber, give_up_extra: bool) -> GroupAssignment:
    member_ids = spec.member_ids
    first = spec.member_subscription(member_ids[0]).topic_ids
    # Kafka copies the first member's subscription into a HashSet<Uuid> and iterates that
    subscribed = java_hash_order(first, uuid_hash, java_hashset_capacity_from_collection(len(first)))
    if not subscribed:
        return {}
    subscribed_set = set(subscribed)

    unassigned: list[tuple[str, int]] = []
    sizes: dict[str, int] = {}
    total = 0
    for topic_id in subscribed:
        n = topics.num_partitions(topic_id)
        if n == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )
        owned = spec.owners.get(topic_id, {})
        unassigned.extend((topic_id, p) for p in range(n) if p not in owned)
        sizes[topic_id] = n
        total += n

    min_quota, extra = divmod(total, len(member_ids))
    target: dict[str, dict[str, list[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for index, member_id in enumerate(member_ids):
        quota = min_quota
        has_extra = extra > 0
        if has_extra:
            quota += 1
        kept: dict[str, list[int]] = {}
        for topic_id, partitions in spec.member_assignment(member_id).items():
            if topic_id not in subscribed_set:
                continue  # the whole topic is released
            partitions = [p for p in partitions if p < sizes[topic_id]]
            if len(partitions) <= quota:
                quota -= len(partitions)
                kept[topic_id] = partitions
                continue
            mine = []
            for p in partitions:
                if quota > 0:
                    quota -= 1
                    mine.append(p)
                else:
                    unassigned.append((topic_id, p))
            kept[topic_id] = mine
        if give_up_extra and has_extra and quota > 0 and len(member_ids) - index > extra:
            # 4.1+: an extra partition this member would have to be given goes to a later member that already
            # holds one, unless only the last ``extra`` members are left to take the extras
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra -= 1
        target[member_id] = kept

    next_free = 0
    for member_id, quota in unfilled:
        mine = target[member_id]
        for _ in range(quota):
            if next_free >= len(unassigned):
                break
            topic_id, p = unassigned[next_free]
            next_free += 1
            mine.setdefault(topic_id, []).append(p)
    if next_free < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return {member_id: _frozen(parts) for member_id, parts in target.items()}


# ---------------------------------------------------------------------------------------------------------------
# Heterogeneous
# ---------------------------------------------------------------------------------------------------------------


class _Balancer:
    """Kafka's ``MemberAssignmentBalancer``: two ranges over the members sorted by load.

    The least loaded range grows rightwards as its members each receive a partition; the most loaded range grows
    leftwards as its members each give one up.  ``sizes`` is shared with the builder and read live.
    """

    __slots__ = (
        "sizes",
        "members",
        "least_end",
        "least_count",
        "next_least",
        "most_start",
        "most_end",
        "most_count",
        "next_most",
    )

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.members: list[int] = []

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        sizes = self.sizes
        self.members = sorted(members, key=lambda m: (sizes[m], m))
        self.least_end = 0
        self.least_count = sizes[self.members[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.members)
        self.most_count = sizes[self.members[-1]] + 1
        self.next_most = len(self.members) - 1
        return sizes[self.members[-1]] - sizes[self.members[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            members, sizes = self.members, self.sizes
            while self.least_end < len(members) and sizes[members[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member = self.members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        members, sizes = self.members, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # the range was emptied by exclusions: restart from the next member down
                self.most_count = sizes[members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[members[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member last returned by ``next_most_loaded`` from the most loaded range."""
        members = self.members
        i = self.next_most + 1
        members[i], members[self.most_end - 1] = members[self.most_end - 1], members[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Heterogeneous:
    def __init__(self, spec: GroupSpec, topics: SubscribedTopicDescriber) -> None:
        self.spec = spec
        self.member_ids = spec.member_ids
        self.num_partitions: dict[str, int] = {}
        self.subscribers: dict[str, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic_id in spec.member_subscription(member_id).topic_ids:
                n = topics.num_partitions(topic_id)
                if n == -1:
                    raise PartitionAssignorError(
                        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
                    )
                self.num_partitions[topic_id] = n
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * n for t, n in self.num_partitions.items()}
        self.target: list[dict[str, set[int]]] = [{} for _ in self.member_ids]

    def _topic_key(self, topic_id: str):
        n, s = self.num_partitions[topic_id], len(self.subscribers[topic_id])
        return (-(n / s), s, uuid_sort_key(topic_id))

    def _sorted_topics(self, topic_ids) -> list[str]:
        return sorted(topic_ids, key=self._topic_key)

    def build(self) -> GroupAssignment:
        if not self.num_partitions:
            return {}
        self._keep_subscribed()
        self._assign_remaining()
        movable = [t for t in self.num_partitions if len(self.subscribers[t]) >= 2]
        if movable:
            self._balance_topics(movable)
        return {member_id: _frozen(self.target[i]) for i, member_id in enumerate(self.member_ids)}

    def _keep_subscribed(self) -> None:
        """Kafka's ``maybeRevokePartitions``: keep every current partition of a subscribed topic."""
        for index, member_id in enumerate(self.member_ids):
            subscribed = set(self.spec.member_subscription(member_id).topic_ids)
            mine = self.target[index]
            for topic_id, partitions in self.spec.member_assignment(member_id).items():
                if topic_id not in subscribed:
                    continue
                owners = self.owners[topic_id]
                kept = [p for p in partitions if p < len(owners)]
                self.sizes[index] += len(kept)
                for p in kept:
                    owners[p] = index
                if kept:
                    mine[topic_id] = set(kept)

    def _assign_remaining(self) -> None:
        unassigned = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == -1]
            if free:
                unassigned[topic_id] = free
        balancer = _Balancer(self.sizes)
        for topic_id in self._sorted_topics(unassigned):
            balancer.initialize(self.subscribers[topic_id])
            for p in unassigned[topic_id]:
                self._assign(topic_id, p, balancer.next_least_loaded())

    def _balance_topics(self, topic_ids: list[str]) -> None:
        ordered = self._sorted_topics(topic_ids)
        last_rebalanced = -1
        balancer = _Balancer(self.sizes)
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(ordered):
                if index == last_rebalanced:
                    return  # a whole pass without moves
                moved = self._balance_topic(topic_id, balancer)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic_id: str, balancer: _Balancer) -> int:
        moved = 0
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return moved
        owners = self.owners[topic_id]
        # partitions grouped by owner (ascending partition within an owner)
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        while not balancer.is_balanced():
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()  # nothing of this topic to give up
                    continue
                break
            if most == -1:
                break
            end[most] -= 1
            partition = partitions[end[most]]
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic_id, partition, least)
            moved += 1
        return moved

    def _assign(self, topic_id: str, partition: int, member: int) -> None:
        owners = self.owners[topic_id]
        old = owners[partition]
        if old != -1:
            parts = self.target[old].get(topic_id)
            if parts is not None:
                parts.discard(partition)
                if not parts:
                    del self.target[old][topic_id]
            self.sizes[old] -= 1
        self.target[member].setdefault(topic_id, set()).add(partition)
        owners[partition] = member
        self.sizes[member] += 1
