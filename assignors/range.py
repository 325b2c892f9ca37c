"""Kafka's RangeAssignor, including KIP-881 rack-aware assignment.

Per topic, partitions in numeric order are split into contiguous ranges over the subscribed members in
MemberInfo order; the first ``n % m`` members get one extra partition.

With racks (consumer ``Subscription.rack`` and replica racks in ``partition_racks``), Kafka first hands each
member partitions that have a replica in its rack -- still within that member's range quota -- and then fills
the remaining quota with plain ranges.  Topics with the same subscribers and partition count are
co-partitioned: partition p of all of them goes to the same member so joins stay local.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription, TopicPartition, sorted_members


def use_rack_aware_assignment(
    consumer_racks: set[str],
    partition_racks: set[str],
    racks_per_partition: Mapping[TopicPartition, frozenset[str]],
    prefer_rack_aware: bool,
) -> bool:
    """``AbstractPartitionAssignor.useRackAwareAssignment``: skip rack logic when it cannot change anything."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    if prefer_rack_aware:
        return True
    # If every partition lives in every rack, rack matching is pointless.
    return not all(r == partition_racks for r in racks_per_partition.values())


class _TopicState:
    """Per-topic bookkeeping, as in Kafka's RangeAssignor.TopicAssignmentState."""

    __slots__ = (
        "topic",
        "consumers",
        "consumer_racks",
        "partition_racks",
        "unassigned",
        "assigned_count",
        "per_consumer",
        "remaining_extra",
        "needs_rack_aware",
        "num_partitions",
    )

    def __init__(
        self,
        topic: str,
        num_partitions: int,
        consumers: list[str],
        consumer_racks: Mapping[str, str],
        partition_racks: PartitionRacks | None,
        prefer_rack_aware: bool,
    ) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.consumers = consumers
        self.consumer_racks = {c: consumer_racks.get(c) for c in consumers}
        # dict keeps partition order, like Kafka's LinkedHashSet.
        self.unassigned: dict[int, None] = dict.fromkeys(range(num_partitions))
        self.assigned_count = dict.fromkeys(consumers, 0)
        self.per_consumer = num_partitions // len(consumers) if consumers else 0
        self.remaining_extra = num_partitions % len(consumers) if consumers else 0

        all_consumer_racks = {consumer_racks[c] for c in consumers if c in consumer_racks}
        self.partition_racks: dict[int, frozenset[str]] = {}
        all_partition_racks: set[str] = set()
        if all_consumer_racks:
            for p in range(num_partitions):
                racks = frozenset((partition_racks or {}).get(TopicPartition(topic, p), ()))
                self.partition_racks[p] = racks
                all_partition_racks |= racks
        self.needs_rack_aware = use_rack_aware_assignment(
            all_consumer_racks, all_partition_racks, self.partition_racks, prefer_rack_aware
        )

    def racks_match(self, consumer: str, partition: int) -> bool:
        rack = self.consumer_racks[consumer]
        return rack is None or rack in self.partition_racks.get(partition, ())

    def max_assignable(self, consumer: str) -> int:
        quota = self.per_consumer + (1 if self.remaining_extra > 0 else 0)
        return max(0, quota - self.assigned_count[consumer])

    def on_assigned(self, consumer: str, partitions: list[int]) -> None:
        self.assigned_count[consumer] += len(partitions)
        if self.assigned_count[consumer] > self.per_consumer:
            self.remaining_extra -= 1
        for p in partitions:
            del self.unassigned[p]


class RangeAssignor(Assignor):
    name = "range"
    supported_protocols = (EAGER,)

    def __init__(self, prefer_rack_aware: bool = False) -> None:
        # Kafka's ``preferRackAwareLogic``: use rack matching even when every partition has replicas in all racks.
        self.prefer_rack_aware = prefer_rack_aware

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        ordered = sorted_members(subscriptions)
        consumers_per_topic: dict[str, list[str]] = {}
        for member in ordered:
            for topic in dict.fromkeys(subscriptions[member].topics):
                consumers_per_topic.setdefault(topic, []).append(member)
        consumer_racks = {m: s.rack for m, s in subscriptions.items() if s.rack}  # Kafka ignores ""

        states = [
            _TopicState(
                topic, n, consumers_per_topic.get(topic, []), consumer_racks, partition_racks, self.prefer_rack_aware
            )
            for topic, n in sorted(partitions_per_topic.items())
            if n > 0 and topic in consumers_per_topic
        ]
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}

        if any(s.needs_rack_aware for s in states):
            self._assign_with_rack_matching(states, assignment)
        for state in states:
            self._assign_ranges(state, None, assignment)
        # Kafka sorts only after rack matching; otherwise its lists follow HashMap topic order.  We always
        # return (topic, partition) order -- the same set per member, in a stable order.
        for parts in assignment.values():
            parts.sort()
        return assignment

    @staticmethod
    def _give(consumer: str, partitions: list[int], state: _TopicState, assignment: dict) -> None:
        assignment[consumer].extend(TopicPartition(state.topic, p) for p in partitions)
        state.on_assigned(consumer, partitions)

    def _assign_ranges(self, state: _TopicState, rack_filter: bool | None, assignment: dict) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            chosen: list[int] = []
            if limit > 0:
                for p in state.unassigned:
                    if rack_filter and not state.racks_match(consumer, p):
                        continue
                    chosen.append(p)
                    if len(chosen) >= limit:
                        break
            if chosen:
                self._give(consumer, chosen, state, assignment)

    def _assign_with_rack_matching(self, states: list[_TopicState], assignment: dict) -> None:
        # Group by identical subscriber list, then by partition count (Kafka's two groupingBy calls); the
        # groups touch disjoint topics, so their processing order does not change the result.
        groups: dict[tuple, dict[int, list[_TopicState]]] = {}
        for state in states:
            groups.setdefault(tuple(state.consumers), {}).setdefault(state.num_partitions, []).append(state)
        for consumers, by_count in groups.items():
            for num_partitions, co_partitioned in by_count.items():
                if len(co_partitioned) > 1:
                    self._assign_co_partitioned(list(consumers), num_partitions, co_partitioned, assignment)
                elif co_partitioned[0].needs_rack_aware:
                    self._assign_ranges(co_partitioned[0], True, assignment)

    def _assign_co_partitioned(
        self, consumers: list[str], num_partitions: int, states: list[_TopicState], assignment: dict
    ) -> None:
        remaining = dict.fromkeys(consumers)
        for p in range(num_partitions):
            match = next(
                (c for c in remaining if all(s.racks_match(c, p) and s.max_assignable(c) > 0 for s in states)),
                None,
            )
            if match is None:
                continue
            for s in states:
                self._give(match, [p], s, assignment)
            if not any(s.max_assignable(match) > 0 for s in states):
                del remaining[match]
                if not remaining:
                    break
