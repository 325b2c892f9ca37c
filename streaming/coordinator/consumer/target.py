"""Kafka's ``TargetAssignmentBuilder``: run the group's server-side assignor and write the delta as records.

Input: the group's members (with the member being added, updated or removed by this request), their current
target assignments, the subscription metadata (topic name -> (id, partitions)) and the resolved regexes. A member
subscribed by regex is subscribed to the union of its topic names and its regex's resolved topics. A new static
member that replaces a departed one starts from the departed member's target assignment.

Output: the new target assignment of every member, and the records -- one ``ConsumerGroupTargetAssignmentMember``
per member whose target changed, then ``ConsumerGroupTargetAssignmentMetadata`` with the new epoch.

Member order: Kafka hands the assignor a ``HashMap`` of member ids, and its tie breaks follow that order (the
uniform assignor's extra partitions, for one). Kafka fills that map from the group's members -- a ``TimelineHashMap``,
iterated in its own order (``assignors.java.timeline_hash_order``: the members in the order they joined, in a table
of ``member_slots`` slots) -- then adds the joining member and removes the replaced one; ids in the same ``HashMap``
bucket keep that insertion order. Built the same way here. (A broker that reloaded the group from its log rebuilt
its table from the members then present, possibly smaller: not known from the records.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from assignors.java import JavaHashSet, java_hash_order, java_string_hash, timeline_hash_order
from assignors.server import GroupSpec, MemberSubscription, SubscribedTopicDescriber, TopicMetadata
from assignors.server.types import uuid_hash, uuid_sort_key
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.group import ResolvedRegex
from streaming.coordinator.consumer.member import ConsumerGroupMember, assignment
from streaming.coordinator.consumer.topics import TopicImage


@dataclass
class TargetAssignmentResult:
    records: list[dict]
    assignment: dict[str, dict[str, frozenset]]


def member_topics(member: ConsumerGroupMember, resolved: Mapping[str, ResolvedRegex]) -> frozenset:
    topics = frozenset(member.subscribed_topic_names)
    if member.regex and member.regex in resolved:
        topics |= resolved[member.regex].topics
    return topics


def can_compute_next_target_assignment(last_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka 4.3+'s GroupMetadataManager.canComputeNextTargetAssignment: at once when no computation is known
    (``last_ms`` 0) or there is no interval (which also gets past a clock set back), else once the interval since
    the last computation has run out."""
    return last_ms == 0 or interval_ms == 0 or now_ms >= last_ms + interval_ms


def build_target_assignment(
    group_id: str,
    group_epoch: int,
    assignor,
    members: Mapping[str, ConsumerGroupMember],
    static_members: Mapping[str, str],
    subscription_metadata: Mapping[str, tuple[str, int]],
    subscription_type: str,
    target: Mapping[str, Mapping[str, frozenset]],
    resolved_regexes: Mapping[str, ResolvedRegex],
    image: TopicImage,
    updates: Mapping[str, ConsumerGroupMember | None] = {},
    member_slots: int | None = None,
    timestamp: int = 0,
) -> TargetAssignmentResult:
    """``updates``: member id -> the member as it will be (None: removed), in the order the request made them;
    ``members`` in the order they joined the group, ``member_slots`` its member table's size (None: as small as
    the members allow); ``timestamp``: the time of the computation, for the metadata record. Raises the assignor's
    errors."""
    specs: dict[str, ConsumerGroupMember] = {mid: m for mid, m in members.items()}
    current: dict[str, Mapping[str, frozenset]] = {mid: target.get(mid, {}) for mid in members}
    for member_id, member in updates.items():
        if member is None:
            specs.pop(member_id, None)
            current.pop(member_id, None)
            continue
        start = target.get(member_id, {})
        if member.instance_id is not None:
            previous = static_members.get(member.instance_id)
            if previous is not None and previous != member_id:
                start = target.get(previous, {})
        specs[member_id] = member
        current[member_id] = start

    spec_order = JavaHashSet(java_string_hash)  # TargetAssignmentBuilder.build's memberSpecs
    for member_id in timeline_hash_order(members, **({"capacity": member_slots} if member_slots else {})):
        spec_order.add(member_id)
    for member_id in java_hash_order(list(updates), java_string_hash):  # its updatedMembers, a HashMap too
        if updates[member_id] is None:
            spec_order.discard(member_id)
        else:
            spec_order.add(member_id)
    order = list(spec_order)
    describer = SubscribedTopicDescriber(
        TopicMetadata(topic_id, name, partitions)
        for name, (topic_id, partitions) in sorted(subscription_metadata.items())
    )
    spec_members = {}
    for member_id in order:
        m = specs[member_id]
        # Names resolve against the cluster's topics (Kafka's TopicIds over the metadata image).
        ids = tuple(sorted(image.by_name[n].topic_id for n in member_topics(m, resolved_regexes) if n in image.by_name))
        spec_members[member_id] = MemberSubscription(
            topic_ids=ids,
            rack=m.rack_id,
            instance_id=m.instance_id,
            # Kafka's HashMap of topic ids, whatever order this dict was built in (a group rebuilt from its records
            # or from its serialised state must get the same answer).
            assignment={
                t: tuple(sorted(current[member_id][t]))
                for t in java_hash_order(sorted(current[member_id], key=uuid_sort_key), uuid_hash)
            },
        )
    spec = GroupSpec(spec_members, describer, subscription_type=subscription_type)
    result = assignor.assign(spec, describer) if spec_members else {}

    new_assignment = {mid: assignment(result.get(mid, {})) for mid in order}
    records = [
        R.target_assignment(group_id, mid, new_assignment[mid])
        for mid in order
        if target.get(mid) is None or new_assignment[mid] != target.get(mid)
    ]
    records.append(R.target_assignment_epoch(group_id, group_epoch, timestamp))
    return TargetAssignmentResult(records, new_assignment)
