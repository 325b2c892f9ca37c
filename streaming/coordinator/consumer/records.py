"""The ``__consumer_offsets`` records Kafka's coordinator writes for a consumer group (KIP-848), as plain dicts.

They are exactly the offsets store's record dicts (``offsets_store/codec.py`` documents them), as the classic
coordinator's ``offset_commit``/``group_metadata`` outputs are, and ``outputs.ConsumerGroupRecord`` declares them:
``type`` names the record (``consumer_group_metadata``, ``consumer_group_member_metadata``, ...), the key fields are
snake_case (``group_id``, ``member_id``, ``regular_expression``), the value fields sit beside them under Kafka's JSON
names (``memberEpoch``, ``assignedPartitions``, ...; ``outputs.py`` says why the two conventions meet here), and
``tombstone`` is True for a key without a value (then no value field is present). The coordinator adds ``ts`` to what
it writes out (``written``); the codec ignores it. So the records go model -> store -> model
unchanged: ``encode_record``/``decode_record`` round-trip them and ``ConsumerGroup.replay`` reads either form (a
decoded record also carries ``value_version`` and the defaults of fields this model does not write).

Kafka fills lists from hash sets; here topics come in Kafka's ``Uuid`` order and partitions ascending, so the same
state always gives the same bytes (Kafka's readers do not depend on that order).
"""

from __future__ import annotations

from typing import Mapping

from assignors.server.types import uuid_sort_key
from streaming.coordinator import outputs
from streaming.coordinator.consumer.member import Assignment, ConsumerGroupMember
from streaming.coordinator.outputs import ConsumerGroupRecord

# The store's record type -> Kafka's record name (its ...Key/...Value schemas in group-coordinator/src/main/resources/
# common/message) and the record type id (the key version).
METADATA = outputs.CONSUMER_GROUP_METADATA
PARTITION_METADATA = outputs.CONSUMER_GROUP_PARTITION_METADATA
MEMBER_METADATA = outputs.CONSUMER_GROUP_MEMBER_METADATA
TARGET_ASSIGNMENT_METADATA = outputs.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
TARGET_ASSIGNMENT_MEMBER = outputs.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
CURRENT_MEMBER_ASSIGNMENT = outputs.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
REGULAR_EXPRESSION = outputs.CONSUMER_GROUP_REGULAR_EXPRESSION
KAFKA_NAMES = {
    METADATA: ("ConsumerGroupMetadata", 3),
    PARTITION_METADATA: ("ConsumerGroupPartitionMetadata", 4),
    MEMBER_METADATA: ("ConsumerGroupMemberMetadata", 5),
    TARGET_ASSIGNMENT_METADATA: ("ConsumerGroupTargetAssignmentMetadata", 6),
    TARGET_ASSIGNMENT_MEMBER: ("ConsumerGroupTargetAssignmentMember", 7),
    CURRENT_MEMBER_ASSIGNMENT: ("ConsumerGroupCurrentMemberAssignment", 8),
    REGULAR_EXPRESSION: ("ConsumerGroupRegularExpression", 16),
}
RECORD_TYPES = frozenset(KAFKA_NAMES)


def is_record(output: Mapping) -> bool:
    """Whether an output (or a record read from the store) is one of these records."""
    return output.get("type") in RECORD_TYPES


def _record(kind: str, group_id: str, value: dict | None, **key) -> ConsumerGroupRecord:
    if value is None:
        return {"type": kind, "group_id": group_id, **key, "tombstone": True}
    return {"type": kind, "group_id": group_id, **key, **value, "tombstone": False}


def written(record: ConsumerGroupRecord, ts: int) -> ConsumerGroupRecord:
    """The record as the coordinator writes it out: a copy, with the time it was written (last)."""
    return {**record, "ts": ts}


def topic_partitions(a: Assignment, id_field: str = "topicId") -> list[dict]:
    return [{id_field: topic_id, "partitions": sorted(a[topic_id])} for topic_id in sorted(a, key=uuid_sort_key)]


def epoch(group_id: str, group_epoch: int | None) -> ConsumerGroupRecord:
    return _record(METADATA, group_id, None if group_epoch is None else {"epoch": group_epoch})


def partition_metadata(group_id: str, topics: Mapping[str, tuple[str, int]] | None) -> ConsumerGroupRecord:
    """``topics``: topic name -> (topic id, partition count); None for the tombstone."""
    if topics is None:
        return _record(PARTITION_METADATA, group_id, None)
    return _record(
        PARTITION_METADATA,
        group_id,
        {
            "topics": [
                {
                    "topicId": topics[name][0],
                    "topicName": name,
                    "numPartitions": topics[name][1],
                    "partitionMetadata": [],
                }
                for name in sorted(topics)
            ]
        },
    )


def member_subscription(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupRecord:
    return _record(
        MEMBER_METADATA,
        group_id,
        {
            "instanceId": member.instance_id,
            "rackId": member.rack_id,
            "clientId": member.client_id,
            "clientHost": member.client_host,
            "subscribedTopicNames": sorted(member.subscribed_topic_names),
            "subscribedTopicRegex": member.subscribed_topic_regex,
            "rebalanceTimeoutMs": member.rebalance_timeout_ms,
            "serverAssignor": member.server_assignor,
            "classicMemberMetadata": member.classic.to_record() if member.classic is not None else None,
        },
        member_id=member.member_id,
    )


def member_subscription_tombstone(group_id: str, member_id: str) -> ConsumerGroupRecord:
    return _record(MEMBER_METADATA, group_id, None, member_id=member_id)


def target_assignment_epoch(group_id: str, assignment_epoch: int | None, timestamp: int = 0) -> ConsumerGroupRecord:
    """``timestamp``: when the target was computed (Kafka 4.3+ writes it; 0, its default, is left out as Kafka's
    tagged field is)."""
    value = None if assignment_epoch is None else {"assignmentEpoch": assignment_epoch}
    if value is not None and timestamp:
        value["assignmentTimestamp"] = timestamp
    return _record(TARGET_ASSIGNMENT_METADATA, group_id, value)


def target_assignment(group_id: str, member_id: str, partitions: Assignment | None) -> ConsumerGroupRecord:
    return _record(
        TARGET_ASSIGNMENT_MEMBER,
        group_id,
        None if partitions is None else {"topicPartitions": topic_partitions(partitions)},
        member_id=member_id,
    )


def current_assignment(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupRecord:
    return _record(
        CURRENT_MEMBER_ASSIGNMENT,
        group_id,
        {
            "memberEpoch": member.member_epoch,
            "previousMemberEpoch": member.previous_member_epoch,
            "state": int(member.state),
            "assignedPartitions": topic_partitions(member.assigned_partitions),
            "partitionsPendingRevocation": topic_partitions(member.partitions_pending_revocation),
        },
        member_id=member.member_id,
    )


def current_assignment_tombstone(group_id: str, member_id: str) -> ConsumerGroupRecord:
    return _record(CURRENT_MEMBER_ASSIGNMENT, group_id, None, member_id=member_id)


def regular_expression(
    group_id: str, regex: str, topics: frozenset | None, version: int = 0, timestamp: int = 0
) -> ConsumerGroupRecord:
    value = None if topics is None else {"topics": sorted(topics), "version": version, "timestamp": timestamp}
    return _record(REGULAR_EXPRESSION, group_id, value, regular_expression=regex)


def assignment_from_record(topic_partition_list: list[dict] | None) -> dict[str, frozenset]:
    out: dict[str, frozenset] = {}
    for tp in topic_partition_list or []:
        parts = frozenset(int(p) for p in tp["partitions"])
        if parts:
            out[tp["topicId"]] = out.get(tp["topicId"], frozenset()) | parts
    return out
