"""Kafka's ``TargetAssignmentBuilder``: run the group's server-side assignor and write the delta as records.

Input: the group's members (with the member being added, updated or removed by this request), their current
target assignments, the subscription metadata (topic name -> (id, partitions)) and the resolved regexes. A member
subscribed by regex is subscribed to the union of its topic names and its regex's resolved topics. A new static
member that replaces a departed one starts from the departed member's target assignment.

Output: the new target assignment of every member, and the records -- one ``ConsumerGroupTargetAssignmentMember``
per member whose target changed, then ``ConsumerGroupTargetAssignmentMetadata`` with the new epoch.

Member order: Kafka hands the assignor a ``HashMap`` of member ids, and its tie breaks follow that order; here the
members are given in ``java.util.HashMap`` order of their ids too (``assignors.java.java_hash_order``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from assignors.java import java_hash_order, java_string_hash
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


def build_target_assignment(group_id: str, group_epoch: int, assignor, members: Mapping[str, ConsumerGroupMember],
                            static_members: Mapping[str, str], subscription_metadata: Mapping[str, tuple[str, int]],
                            subscription_type: str, target: Mapping[str, Mapping[str, frozenset]],
                            resolved_regexes: Mapping[str, ResolvedRegex], image: TopicImage,
                            updates: Mapping[str, ConsumerGroupMember | None] = {}) -> TargetAssignmentResult:
    """``updates``: member id -> the member as it will be (None: removed). Raises the assignor's errors."""
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

    order = java_hash_order(sorted(specs), java_string_hash)   # colliding ids: the same order however built
    describer = SubscribedTopicDescriber(
        TopicMetadata(topic_id, name, partitions)
        for name, (topic_id, partitions) in sorted(subscription_metadata.items()))
    spec_members = {}
    for member_id in order:
        m = specs[member_id]
        # Names resolve against the cluster's topics (Kafka's TopicIds over the metadata image).
        ids = tuple(sorted(image.by_name[n].topic_id for n in member_topics(m, resolved_regexes)
                           if n in image.by_name))
        spec_members[member_id] = MemberSubscription(
            topic_ids=ids, rack=m.rack_id, instance_id=m.instance_id,
            # Kafka's HashMap of topic ids, whatever order this dict was built in (a group rebuilt from its records
            # or from its serialised state must get the same answer).
            assignment={t: tuple(sorted(current[member_id][t])) for t in java_hash_order(
                sorted(current[member_id], key=uuid_sort_key), uuid_hash)})
    spec = GroupSpec(spec_members, describer, subscription_type=subscription_type)
    result = assignor.assign(spec, describer) if spec_members else {}

    new_assignment = {mid: assignment(result.get(mid, {})) for mid in order}
    records = [R.target_assignment(group_id, mid, new_assignment[mid]) for mid in order
               if target.get(mid) is None or new_assignment[mid] != target.get(mid)]
    records.append(R.target_assignment_epoch(group_id, group_epoch))
    return TargetAssignmentResult(records, new_assignment)
