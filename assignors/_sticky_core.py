"""The algorithm shared by Sticky and CooperativeSticky (a port of Kafka's AbstractStickyAssignor).

Two builders, chosen exactly as Kafka chooses them:

* constrained -- every member subscribes to the same topics: keep owned partitions up to the quota, then
  round-robin the rest over the members below quota (fast path, used by the 1M-partition benchmark);
* general -- subscriptions differ: keep valid owned partitions, hand each unassigned partition to the least
  loaded eligible member, then move partitions until balanced, reverting if balance did not improve.

Java iterates the subscriptions ``HashMap`` (member ids) and one ``HashSet`` of partitions; both orders are
reproduced with ``java.java_hash_order`` so ties break the way Kafka breaks them.  The order of the caller's
``subscriptions`` dict stands for the JoinGroup response order (the HashMap insertion order).

KIP-881 rack awareness (Kafka's ``RackInfo``): consumer racks come from ``Subscription.rack`` (empty racks are
ignored) and replica racks from ``partition_racks``.  The rack-aware path is taken only when racks can matter
(``range.use_rack_aware_assignment``: some consumer rack holds replicas and some partition is not on every rack,
unless ``prefer_rack_aware``).  Then

* owned partitions whose replicas are not on the owner's rack are not kept (they may move, which counts as a
  transfer for CooperativeSticky);
* constrained: unassigned partitions, ordered by how many consumers share a rack with their replicas (fewest
  first), are dealt round-robin to under-quota members on a matching rack, then to members that may still take
  one over the minimum; the rest go through the usual round-robin;
* general: unassigned partitions go to the least loaded eligible member on a matching rack first (a member
  without a rack matches every partition, as in Kafka's ``racksMismatch``), the rest to the least loaded
  eligible member; the balancing moves are Kafka's.  Kafka's balancing loop also looks for a same-rack
  candidate, but in both of its branches it moves the partition to the least loaded subscriber, so the
  outcome is the one of the rack-unaware loop and nothing of it is ported.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Mapping

from .base import PartitionRacks, Subscription, TopicPartition
from .java import JavaHashSet, java_hash_order, java_string_hash, java_string_order_key, java_topic_partition_hash

DEFAULT_GENERATION = -1


def java_member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Iteration order of Kafka's ``Map<String, Subscription>`` (a default-capacity HashMap)."""
    return java_hash_order(subscriptions.keys(), java_string_hash)


class StickyResult:
    """Assignment plus, for the constrained path, the partitions Kafka knows are changing owner.

    ``sticky`` is Kafka's ``isSticky()`` for the general path: False if some topic had partitions moving both
    ways between two members (the constrained path tracks no movements and reports True).
    """

    __slots__ = ("assignment", "transferring", "sticky")

    def __init__(
        self,
        assignment: dict[str, list[TopicPartition]],
        transferring: dict[TopicPartition, str] | None,
        sticky: bool = True,
    ):
        self.assignment = assignment
        self.transferring = transferring
        self.sticky = sticky


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    partition_racks: PartitionRacks | None = None,
    prefer_rack_aware: bool = False,
) -> StickyResult:
    # Kafka's leader only passes subscribed topics that have metadata (AbstractPartitionAssignor.assign).
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    topics = {t: n for t, n in partitions_per_topic.items() if t in subscribed and n > 0}
    members = java_member_order(subscriptions)
    if not members:
        return StickyResult({}, {})

    racks = RackInfo(topics, subscriptions, partition_racks, prefer_rack_aware)
    all_equal, owned, multi_owners = _all_subscriptions_equal(topics, subscriptions, members)
    if all_equal:
        return _ConstrainedBuilder(topics, owned, multi_owners, members, racks).build()
    builder = _GeneralBuilder(topics, owned, subscriptions, members, racks)
    assignment = builder.build()
    return StickyResult(assignment, None, builder.movements.is_sticky())


_NO_RACKS: frozenset[str] = frozenset()


class RackInfo:
    """Kafka's ``AbstractStickyAssignor.RackInfo``: who sits on which rack, and whether racks are used at all.

    ``enabled`` is False when racks cannot change the answer; then ``consumer_racks`` is empty and every
    rack check passes, exactly as Kafka empties its maps.  Replica racks are kept per topic as a list indexed
    by partition (``by_topic``), so the hot loops look them up without hashing a TopicPartition.
    """

    __slots__ = ("enabled", "consumer_racks", "by_topic", "rack_consumer_counts")

    def __init__(
        self,
        topics: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None,
        prefer_rack_aware: bool = False,
    ) -> None:
        self.enabled = False
        self.consumer_racks: dict[str, str] = {}
        self.by_topic: dict[str, list[frozenset[str]]] = {}
        self.rack_consumer_counts: dict[frozenset[str], int] = {}
        consumers_per_rack: dict[str, int] = {}
        for sub in subscriptions.values():
            if sub.rack:  # Kafka ignores an empty rack id
                consumers_per_rack[sub.rack] = consumers_per_rack.get(sub.rack, 0) + 1
        if not consumers_per_rack:
            return

        # Replica racks of every partition of the subscribed topics; a partition missing from the mapping has
        # no rack information (Kafka: a replica list without racks).
        by_topic = {t: [_NO_RACKS] * n for t, n in topics.items()}
        for tp, racks in (partition_racks or {}).items():
            lst = by_topic.get(tp[0])
            if lst is not None and 0 <= tp[1] < len(lst):
                lst[tp[1]] = racks if type(racks) is frozenset else frozenset(racks)
        distinct: set[frozenset[str]] = set()
        for lst in by_topic.values():
            distinct.update(lst)
        if any(None in racks for racks in distinct):  # a replica without a rack adds nothing
            clean = {racks: frozenset(r for r in racks if r is not None) for racks in distinct}
            for lst in by_topic.values():
                lst[:] = [clean[racks] for racks in lst]
            distinct = set(clean.values())
        all_partition_racks: set[str] = set().union(*distinct)

        if set(consumers_per_rack).isdisjoint(all_partition_racks):
            return
        if not prefer_rack_aware and all(racks == all_partition_racks for racks in distinct):
            return  # every partition is on every rack: racks cannot matter

        self.enabled = True
        self.consumer_racks = {m: s.rack for m, s in subscriptions.items() if s.rack}
        self.by_topic = by_topic
        # Kafka's numConsumersByPartition, per distinct set of replica racks
        self.rack_consumer_counts = {racks: sum(consumers_per_rack.get(r, 0) for r in racks) for racks in distinct}

    def racks(self, tp: TopicPartition) -> frozenset[str]:
        lst = self.by_topic.get(tp[0])
        if lst is None or not 0 <= tp[1] < len(lst):
            return _NO_RACKS
        return lst[tp[1]]

    def mismatch(self, member: str, tp: TopicPartition) -> bool:
        """Kafka's ``racksMismatch``: the member has a rack and no replica of ``tp`` lives there."""
        rack = self.consumer_racks.get(member)
        return rack is not None and rack not in self.racks(tp)

    def sort_by_rack_consumers(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Kafka's ``sortPartitionsByRackConsumers``: stable sort, partitions with fewest same-rack consumers first."""
        counts = self.rack_consumer_counts
        if len(set(counts.values())) <= 1:
            return partitions  # all keys equal: a stable sort would not move anything
        by_topic = self.by_topic
        buckets: dict[int, list[TopicPartition]] = {}
        for tp in partitions:  # a stable bucket sort on small integer keys
            key = counts[by_topic[tp[0]][tp[1]]]
            bucket = buckets.get(key)
            if bucket is None:
                buckets[key] = [tp]
            else:
                bucket.append(tp)
        return [tp for key in sorted(buckets) for tp in buckets[key]]


def _all_subscriptions_equal(
    topics: Mapping[str, int], subscriptions: Mapping[str, Subscription], members: list[str]
) -> tuple[bool, dict[str, list[TopicPartition]], set[TopicPartition]]:
    """Kafka's allSubscriptionsEqual: also resolves conflicting claims on owned partitions.

    A partition claimed by two members of the same generation is invalid for both; between different
    generations the higher one keeps it.
    """
    all_equal = True
    first_topics: set[str] | None = None
    owned: dict[str, list[TopicPartition]] = {}
    multi_owners: set[TopicPartition] = set()
    previous_owner: dict[TopicPartition, str] = {}

    for member in members:
        sub = subscriptions[member]
        member_topics = sub.topics
        if not first_topics:
            first_topics = set(member_topics)
        elif all_equal and not (len(member_topics) == len(first_topics) and first_topics.issuperset(member_topics)):
            all_equal = False

        generation = DEFAULT_GENERATION if sub.generation is None else sub.generation
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in sub.owned_partitions:
            if tp.topic not in topics:
                continue
            other = previous_owner.get(tp)
            if other is None:
                mine.append(tp)
                previous_owner[tp] = member
                continue
            other_gen = subscriptions[other].generation
            other_gen = DEFAULT_GENERATION if other_gen is None else other_gen
            if generation == other_gen:
                multi_owners.add(tp)
                _remove_first(owned[other], tp)
                previous_owner[tp] = member
            elif generation > other_gen:
                mine.append(tp)
                _remove_first(owned[other], tp)
                previous_owner[tp] = member
            # else: the other member's newer claim stands
    return all_equal, owned, multi_owners


def _remove_first(items: list, value) -> None:
    try:
        items.remove(value)
    except ValueError:
        pass


def _sorted_topic_partitions(topics: Mapping[str, int], topic_order: list[str]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in topic_order for p in range(topics[t])]


# ---------------------------------------------------------------------------------------------------------------
# Constrained (all subscriptions equal)
# ---------------------------------------------------------------------------------------------------------------


class _ConstrainedBuilder:
    def __init__(
        self,
        topics: Mapping[str, int],
        owned: dict[str, list[TopicPartition]],
        multi_owners: set[TopicPartition],
        members: list[str],
        racks: RackInfo | None = None,
    ) -> None:
        self.topics = topics
        self.owned = owned
        self.multi_owners = multi_owners
        self.members = members  # HashMap iteration order of consumerToOwnedPartitions
        self.racks = racks if racks is not None and racks.enabled else None
        total = sum(topics.values())
        n = len(members)
        self.total = total
        self.min_quota = total // n
        self.max_quota = -(-total // n)
        self.expected_over_min = total % n
        self.current_over_min = 0
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.transferring: dict[TopicPartition, str] = {}
        self.under_min: list[str] = []
        self.exactly_min: deque[str] = deque()
        self.key = java_string_order_key(members)

    def build(self) -> StickyResult:
        assigned = self._assign_owned()
        unassigned = self._unassigned(assigned)
        self.under_min.sort(key=self.key)
        self.exactly_min = deque(sorted(self.exactly_min, key=self.key))
        if self.racks is not None:
            unassigned = self._rack_aware_round_robin(self.racks.sort_by_rack_consumers(unassigned))
        self._round_robin(unassigned)
        self._verify()
        return StickyResult(self.assignment, self.transferring)

    def _assign_owned(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        min_q, max_q = self.min_quota, self.max_quota
        racks = self.racks
        for member in self.members:
            mine = self.owned[member]
            rack = racks.consumer_racks.get(member) if racks is not None else None
            if rack is not None and mine:
                # An owned partition off the member's rack is released (and may move to a member on its rack).
                by_topic = racks.by_topic  # (owned partitions are of subscribed topics; the index may be stale)
                kept = [tp for tp in mine if 0 <= tp[1] < len(by_topic[tp[0]]) and rack in by_topic[tp[0]][tp[1]]]
                if len(kept) < len(mine):
                    kept_set = set(kept)
                    for tp in mine:
                        if tp not in kept_set:
                            self.maybe_revoked[tp] = member
                mine = kept
            # Kafka keeps the owned partitions sorted by partition number, then topic.
            mine = sorted(mine, key=lambda tp: (tp.partition, tp.topic))
            if self.multi_owners:
                mine = [tp for tp in mine if tp not in self.multi_owners]
            target = self.assignment[member]
            if len(mine) < min_q:
                target.extend(mine)
                assigned.update(mine)
                self.under_min.append(member)
            elif len(mine) >= max_q and self.current_over_min < self.expected_over_min:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
                target.extend(mine[:max_q])
                assigned.update(mine[:max_q])
                for tp in mine[max_q:]:
                    self.maybe_revoked[tp] = member
            else:
                target.extend(mine[:min_q])
                assigned.update(mine[:min_q])
                for tp in mine[min_q:]:
                    self.maybe_revoked[tp] = member
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(member)
        return assigned

    def _unassigned(self, assigned: set[TopicPartition]) -> list[TopicPartition]:
        order = sorted(self.topics, key=java_string_order_key(self.topics))
        if not assigned:
            return _sorted_topic_partitions(self.topics, order)
        return [tp for tp in _sorted_topic_partitions(self.topics, order) if tp not in assigned]

    def _give(self, tp: TopicPartition, member: str) -> int:
        target = self.assignment[member]
        target.append(tp)
        previous = self.maybe_revoked.get(tp)
        if (previous is not None and previous != member) or tp in self.multi_owners:
            self.transferring[tp] = member
        return len(target)

    def _rack_aware_round_robin(self, unassigned: list[TopicPartition]) -> list[TopicPartition]:
        """Kafka's ``assignRackAwareRoundRobin``; returns the partitions it could not place on a matching rack.

        Under-quota members are visited round-robin (from where the last match left off), members at the
        minimum only while some member may still go over it.  Per-rack counts of the members in both lists
        let a partition whose racks hold no candidate skip the scan Kafka would do over the whole list.
        """
        racks = self.racks
        rack_of = racks.consumer_racks
        by_topic = racks.by_topic
        under, exact = self.under_min, self.exactly_min
        min_q, max_q = self.min_quota, self.max_quota
        # How many members of each list sit on a rack of each distinct replica-rack set: a partition whose set
        # has no candidate is skipped without the scan Kafka does over the whole list.
        rack_sets = list(racks.rack_consumer_counts)
        sets_with: dict[str | None, list[frozenset[str]]] = {
            r: [rs for rs in rack_sets if r in rs] for r in set(rack_of.values())
        }
        sets_with[None] = []
        under_in = dict.fromkeys(rack_sets, 0)
        exact_in = dict.fromkeys(rack_sets, 0)
        for m in under:
            for rs in sets_with[rack_of.get(m)]:
                under_in[rs] += 1
        for m in exact:
            for rs in sets_with[rack_of.get(m)]:
                exact_in[rs] += 1
        assignment = self.assignment
        plain_give = not self.maybe_revoked and not self.multi_owners
        remaining: list[TopicPartition] = []
        next_index = 0
        for tp in unassigned:
            tp_racks = by_topic[tp[0]][tp[1]]
            member = None
            if under_in[tp_racks]:
                n = len(under)
                index = next_index
                while rack_of.get(under[index]) not in tp_racks:
                    index = index + 1 if index + 1 < n else 0
                member = under[index]
                count = len(assignment[member]) + 1
                if count >= min_q:
                    del under[index]
                    for rs in sets_with[rack_of.get(member)]:
                        under_in[rs] -= 1
                    if count < max_q and self.current_over_min < self.expected_over_min:
                        exact.append(member)
                        for rs in sets_with[rack_of.get(member)]:
                            exact_in[rs] += 1
                else:
                    index += 1
                next_index = index % len(under) if under else 0
            elif exact_in[tp_racks]:
                index = 0
                while rack_of.get(exact[index]) not in tp_racks:
                    index += 1
                member = exact[index]
                if len(assignment[member]) + 1 == max_q:
                    del exact[index]
                    for rs in sets_with[rack_of.get(member)]:
                        exact_in[rs] -= 1
                    self.current_over_min += 1
                    if self.current_over_min == self.expected_over_min:
                        exact.clear()
                        exact_in = dict.fromkeys(rack_sets, 0)
            if member is None:
                remaining.append(tp)
            elif plain_give:
                assignment[member].append(tp)
            else:
                self._give(tp, member)
        return remaining

    def _round_robin(self, unassigned: list[TopicPartition]) -> None:
        under, exact = self.under_min, self.exactly_min
        min_q, max_q = self.min_quota, self.max_quota
        pos = 0  # Java's iterator over ``under``; removals happen just behind it
        for tp in unassigned:
            if pos < len(under):
                member = under[pos]
                pos += 1
                from_iter = True
            elif not under and not exact:
                raise RuntimeError("no more unfilled consumers to be assigned")
            elif not under:
                member = exact.popleft()
                from_iter = False
            else:
                member = under[0]
                pos = 1
                from_iter = True
            count = self._give(tp, member)
            if count == min_q:
                if from_iter:
                    pos -= 1
                    del under[pos]
                exact.append(member)
            elif count == max_q:
                self.current_over_min += 1

    def _verify(self) -> None:
        if self.under_min:
            if self.current_over_min != self.expected_over_min:
                raise RuntimeError("expected number of members over minQuota not reached")
            for member in self.under_min:
                if len(self.assignment[member]) != self.min_quota:
                    raise RuntimeError(f"consumer {member} does not reach minQuota")


# ---------------------------------------------------------------------------------------------------------------
# General (subscriptions differ)
# ---------------------------------------------------------------------------------------------------------------


class _PartitionMovements:
    """Kafka's PartitionMovements: remembers moves so a later move can undo an earlier one instead."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet[TopicPartition]]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        per_topic = self.by_topic[tp.topic]
        per_topic[pair].remove(tp)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, JavaHashSet(java_topic_partition_hash)).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _dst = self._remove_record(tp)
            if src != new:
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        per_topic = self.by_topic.get(tp.topic)
        if per_topic is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = per_topic.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()

    def is_sticky(self) -> bool:
        """True unless some topic has partitions moving both ways between two members (a 2-cycle)."""
        for pairs in self.by_topic.values():
            if any((dst, src) in pairs for src, dst in pairs):
                return False
        return True


class _SortedMembers:
    """Kafka's ``TreeSet<String>`` ordered by (assignment size, member id)."""

    def __init__(self, sizes: Callable[[str], int], key: Callable[[str], object]) -> None:
        self._sizes = sizes
        self._key = key
        self._items: list[tuple[int, object, str]] = []
        self._present: dict[str, tuple[int, object, str]] = {}

    def add(self, member: str) -> None:
        if member in self._present:
            return
        entry = (self._sizes(member), self._key(member), member)
        bisect.insort(self._items, entry)
        self._present[member] = entry

    def remove(self, member: str) -> None:
        entry = self._present.pop(member, None)
        if entry is not None:
            i = bisect.bisect_left(self._items, entry)
            del self._items[i]

    def __iter__(self):
        return (entry[2] for entry in list(self._items))

    def first(self) -> str:
        return self._items[0][2]

    def last(self) -> str:
        return self._items[-1][2]


class _GeneralBuilder:
    def __init__(
        self,
        topics: Mapping[str, int],
        owned: dict[str, list[TopicPartition]],
        subscriptions: Mapping[str, Subscription],
        members: list[str],
        racks: RackInfo | None = None,
    ) -> None:
        self.topics = topics
        self.subscriptions = subscriptions
        self.members = members
        self.racks = racks if racks is not None and racks.enabled else None
        self.total = sum(topics.values())
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in topics}
        self.consumer_topics: dict[str, list[str]] = {}
        self.consumer_topic_sets: dict[str, frozenset[str]] = {}
        for member in members:
            mine = [t for t in subscriptions[member].topics if t in topics]
            self.consumer_topics[member] = mine
            self.consumer_topic_sets[member] = frozenset(mine)
            for t in mine:
                self.topic_consumers[t].append(member)
        # currentAssignment starts from the validated owned partitions
        self.current: dict[str, list[TopicPartition]] = {m: list(owned.get(m, ())) for m in members}
        self.partition_consumer: dict[TopicPartition, str] = {tp: m for m in members for tp in self.current[m]}
        topic_key = java_string_order_key(topics)
        self.topic_order = sorted(topics, key=lambda t: (len(self.topic_consumers[t]), topic_key(t)))
        self.sorted_all = _sorted_topic_partitions(topics, self.topic_order)
        self.member_key = java_string_order_key(members)
        self.sorted_members = _SortedMembers(lambda m: len(self.current[m]), self.member_key)
        self.revocation_required = False
        self.movements = _PartitionMovements()
        self.max_generation = max(
            (s.generation for s in subscriptions.values() if s.generation is not None), default=DEFAULT_GENERATION
        )

    def build(self) -> dict[str, list[TopicPartition]]:
        prev = self._prepopulate_previous()
        assigned = self._keep_owned()
        unassigned = [tp for tp in self.sorted_all if tp not in assigned] if assigned else list(self.sorted_all)
        for member in self.current:
            self.sorted_members.add(member)
        self._balance(prev, unassigned)
        return self.current

    def _prepopulate_previous(self) -> dict[TopicPartition, tuple[str, int]]:
        """Partitions owned in older generations: where to send them back if that keeps balance."""
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for member in self.members:
            sub = self.subscriptions[member]
            if sub.generation is not None and sub.generation < self.max_generation:
                generation = sub.generation
            elif sub.generation is None and self.max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in sub.owned_partitions:
                known = prev.get(tp)
                if known is None or generation > known[1]:
                    prev[tp] = (member, generation)
        return prev

    def _keep_owned(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        racks = self.racks
        for member, parts in self.current.items():
            subscribed = self.subscriptions[member].topics
            kept = []
            for tp in parts:
                if tp.topic not in self.topic_consumers:
                    self.partition_consumer.pop(tp, None)
                elif tp.topic not in subscribed or (racks is not None and racks.mismatch(member, tp)):
                    # Kafka leaves the stale partition->consumer entry in place here
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.add(tp)
            self.current[member] = kept
        return assigned

    # -- balance ---------------------------------------------------------------------------------------------

    def _max_assignment_size(self, member: str) -> int:
        mine = self.consumer_topics[member]
        if len(mine) == len(self.topics):
            return self.total
        return sum(self.topics[t] for t in mine)

    def _is_balanced(self) -> bool:
        """Kafka's ``isBalanced``: no member below its maximum could take a partition of one of its topics from
        a member holding 2+ more partitions than it does.

        Kafka scans every partition of every member's topics; the same answer comes per topic: the largest
        assignment among the owners of a topic's partitions.  (A member's own partitions never count against
        it, since it cannot hold 2+ more than itself.)
        """
        sizes = self.current
        least = len(sizes[self.sorted_members.first()])
        if least >= len(sizes[self.sorted_members.last()]) - 1:
            return True
        busiest: dict[str, int] = {}  # topic -> largest assignment holding one of its partitions
        for parts in sizes.values():
            n = len(parts)
            if n <= least + 1:
                continue  # cannot be 2+ above anyone
            for topic in {tp.topic for tp in parts}:
                if busiest.get(topic, 0) < n:
                    busiest[topic] = n
        for member in self.sorted_members:
            count = len(sizes[member])
            if count == self._max_assignment_size(member):
                continue
            for topic in self.consumer_topics[member]:
                if busiest.get(topic, 0) > count + 1:
                    return False
        return True

    @staticmethod
    def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
        sizes = sorted(len(v) for v in assignment.values())
        # sum over pairs of |a - b|, computed from the sorted sizes
        score, running = 0, 0
        for i, s in enumerate(sizes):
            score += s * i - running
            running += s
        return score

    def _assign_to_least_loaded(self, tp: TopicPartition, racks: RackInfo | None = None) -> bool:
        """Kafka's ``maybeAssignPartition``: the least loaded subscriber (on a matching rack if ``racks``)."""
        for member in self.sorted_members:
            if tp.topic in self.consumer_topic_sets[member] and (racks is None or not racks.mismatch(member, tp)):
                self.sorted_members.remove(member)
                self.current[member].append(tp)
                self.partition_consumer[tp] = member
                self.sorted_members.add(member)
                return True
        return False

    def _can_topic_move(self, topic: str) -> bool:
        return len(self.topic_consumers[topic]) >= 2

    def _can_consumer_move(self, member: str) -> bool:
        parts = self.current[member]
        if len(parts) < self._max_assignment_size(member):
            return True
        return any(self._can_topic_move(tp.topic) for tp in parts)

    def _balance(self, prev: dict[TopicPartition, tuple[str, int]], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()]
        # First with rack matching, then whatever is left without it.
        to_assign = unassigned
        if self.racks is not None:
            to_assign = [
                tp
                for tp in unassigned
                if not (self.topic_consumers[tp.topic] and self._assign_to_least_loaded(tp, self.racks))
            ]
        for tp in to_assign:
            if self.topic_consumers[tp.topic]:
                self._assign_to_least_loaded(tp)

        fixed_topics = {t for t in self.topic_consumers if not self._can_topic_move(t)}
        if fixed_topics:
            self.sorted_all = [tp for tp in self.sorted_all if tp.topic not in fixed_topics]
            unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]

        fixed: dict[str, list[TopicPartition]] = {}
        for member in self.members:
            if not self._can_consumer_move(member):
                self.sorted_members.remove(member)
                fixed[member] = self.current.pop(member)

        before = {m: list(v) for m, v in self.current.items()}
        before_owner = dict(self.partition_consumer)

        if not self.revocation_required:
            self._reassign(unassigned, prev)
        performed = self._reassign(self.sorted_all, prev)

        if not initializing and performed and self._balance_score(self.current) >= self._balance_score(before):
            for member in self.current:
                self.sorted_members.remove(member)
            self.current.clear()
            self.current.update((m, list(v)) for m, v in before.items())
            self.partition_consumer = before_owner
            for member in self.current:
                self.sorted_members.add(member)

        for member, parts in fixed.items():
            self.current[member] = parts
            self.sorted_members.add(member)

    def _reassign(self, partitions: list[TopicPartition], prev: dict[TopicPartition, tuple[str, int]]) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer.get(tp)
                if consumer is None or consumer not in self.current:
                    continue  # Kafka would hit a null here; such partitions cannot move
                size = len(self.current[consumer])
                previous = prev.get(tp)
                if previous is not None and previous[0] in self.current and size > len(self.current[previous[0]]) + 1:
                    self._move(tp, previous[0])
                    performed = modified = True
                    continue
                for other in self.topic_consumers[tp.topic]:
                    other_parts = self.current.get(other)
                    if other_parts is not None and size > len(other_parts) + 1:
                        self._move(tp, self._least_loaded_for(tp.topic))
                        performed = modified = True
                        break
        return performed

    def _least_loaded_for(self, topic: str) -> str:
        for member in self.sorted_members:
            if topic in self.consumer_topic_sets[member]:
                return member
        raise RuntimeError(f"no consumer for topic {topic}")

    def _move(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        tp = self.movements.partition_to_move(tp, old, new)
        old = self.partition_consumer[tp]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new)
        self.movements.move(tp, old, new)
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.partition_consumer[tp] = new
        self.sorted_members.add(new)
        self.sorted_members.add(old)
