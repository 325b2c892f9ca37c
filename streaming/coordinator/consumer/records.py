"""The ``__consumer_offsets`` records Kafka's coordinator writes for a consumer group (KIP-848), as plain dicts.

Each is ``{"type": "consumer_group_record", "group_id", "record", "key_version", "key", "value", "tombstone"}``
(the coordinator adds ``ts``). ``record`` is Kafka's record name (its ``...Key``/``...Value`` JSON schemas in
``group-coordinator/src/main/resources/common/message``), ``key_version`` the key's version (the record type id),
``key``/``value`` carry the schema's fields under the names Kafka's JSON converters use (``memberEpoch``,
``assignedPartitions``, ...); ``value`` is None for a tombstone. Value versions are all 0.

Kafka fills lists from hash sets; here topics come in Kafka's ``Uuid`` order and partitions ascending, so the same
state always gives the same bytes (Kafka's readers do not depend on that order).
"""
from __future__ import annotations

from typing import Mapping

from assignors.server.types import uuid_sort_key
from streaming.coordinator.consumer.member import Assignment, ConsumerGroupMember

RECORD = "consumer_group_record"
KEY_VERSIONS = {"ConsumerGroupMetadata": 3, "ConsumerGroupPartitionMetadata": 4, "ConsumerGroupMemberMetadata": 5,
                "ConsumerGroupTargetAssignmentMetadata": 6, "ConsumerGroupTargetAssignmentMember": 7,
                "ConsumerGroupCurrentMemberAssignment": 8, "ConsumerGroupRegularExpression": 16}


def _record(name: str, key: dict, value: dict | None) -> dict:
    return {"type": RECORD, "group_id": key["groupId"], "record": name, "key_version": KEY_VERSIONS[name],
            "key": key, "value": value, "tombstone": value is None}


def topic_partitions(a: Assignment, id_field: str = "topicId") -> list[dict]:
    return [{id_field: topic_id, "partitions": sorted(a[topic_id])} for topic_id in sorted(a, key=uuid_sort_key)]


def epoch(group_id: str, group_epoch: int | None) -> dict:
    return _record("ConsumerGroupMetadata", {"groupId": group_id},
                   None if group_epoch is None else {"epoch": group_epoch})


def partition_metadata(group_id: str, topics: Mapping[str, tuple[str, int]] | None) -> dict:
    """``topics``: topic name -> (topic id, partition count); None for the tombstone."""
    if topics is None:
        return _record("ConsumerGroupPartitionMetadata", {"groupId": group_id}, None)
    return _record("ConsumerGroupPartitionMetadata", {"groupId": group_id}, {"topics": [
        {"topicId": topics[name][0], "topicName": name, "numPartitions": topics[name][1], "partitionMetadata": []}
        for name in sorted(topics)]})


def member_subscription(group_id: str, member: ConsumerGroupMember) -> dict:
    return _record("ConsumerGroupMemberMetadata", {"groupId": group_id, "memberId": member.member_id}, {
        "instanceId": member.instance_id, "rackId": member.rack_id, "clientId": member.client_id,
        "clientHost": member.client_host, "subscribedTopicNames": sorted(member.subscribed_topic_names),
        "subscribedTopicRegex": member.subscribed_topic_regex, "rebalanceTimeoutMs": member.rebalance_timeout_ms,
        "serverAssignor": member.server_assignor, "classicMemberMetadata": None})


def member_subscription_tombstone(group_id: str, member_id: str) -> dict:
    return _record("ConsumerGroupMemberMetadata", {"groupId": group_id, "memberId": member_id}, None)


def target_assignment_epoch(group_id: str, assignment_epoch: int | None) -> dict:
    return _record("ConsumerGroupTargetAssignmentMetadata", {"groupId": group_id},
                   None if assignment_epoch is None else {"assignmentEpoch": assignment_epoch})


def target_assignment(group_id: str, member_id: str, partitions: Assignment | None) -> dict:
    return _record("ConsumerGroupTargetAssignmentMember", {"groupId": group_id, "memberId": member_id},
                   None if partitions is None else {"topicPartitions": topic_partitions(partitions)})


def current_assignment(group_id: str, member: ConsumerGroupMember) -> dict:
    return _record("ConsumerGroupCurrentMemberAssignment", {"groupId": group_id, "memberId": member.member_id}, {
        "memberEpoch": member.member_epoch, "previousMemberEpoch": member.previous_member_epoch,
        "state": int(member.state), "assignedPartitions": topic_partitions(member.assigned_partitions),
        "partitionsPendingRevocation": topic_partitions(member.partitions_pending_revocation)})


def current_assignment_tombstone(group_id: str, member_id: str) -> dict:
    return _record("ConsumerGroupCurrentMemberAssignment", {"groupId": group_id, "memberId": member_id}, None)


def regular_expression(group_id: str, regex: str, topics: frozenset | None, version: int = 0,
                       timestamp: int = 0) -> dict:
    key = {"groupId": group_id, "regularExpression": regex}
    if topics is None:
        return _record("ConsumerGroupRegularExpression", key, None)
    return _record("ConsumerGroupRegularExpression", key,
                   {"topics": sorted(topics), "version": version, "timestamp": timestamp})


def assignment_from_record(topic_partition_list: list[dict] | None) -> dict[str, frozenset]:
    out: dict[str, frozenset] = {}
    for tp in topic_partition_list or []:
        parts = frozenset(int(p) for p in tp["partitions"])
        if parts:
            out[tp["topicId"]] = out.get(tp["topicId"], frozenset()) | parts
    return out
