"""A KIP-848 consumer group's state as its ``__consumer_offsets`` records leave it (what a broker rebuilds when it
loads the partition): the group epoch, the target assignment and its epoch, and per member its metadata, target and
current assignment (member epoch, state, partitions pending revocation).

``consumer_group_state`` takes live records (latest value per key, tombstones already applied: what
``Store.load_records`` returns) and shapes them as::

    {"group_id": g,
     "group_epoch": int | None,           # ConsumerGroupMetadataValue.epoch (None: no such record)
     "metadata_hash": int,                # ConsumerGroupMetadataValue.metadataHash (0 when absent)
     "assignment_epoch": int | None,      # ConsumerGroupTargetAssignmentMetadataValue.assignmentEpoch
     "topic_names": {topic_id: name},     # from ConsumerGroupPartitionMetadata (brokers before 4.1 only)
     "regular_expressions": {regex: {"topics": [...], "version": int, "timestamp": int}},
     "members": {member_id: {"metadata": {...} | None,          # ConsumerGroupMemberMetadataValue fields
                             "target_assignment": [{"topicId", "partitions"}] | None,
                             "current_assignment": {"memberEpoch", "previousMemberEpoch", "state",
                                                    "assignedPartitions", "partitionsPendingRevocation"} | None}}}

Value dicts keep the codec's Kafka field names (see ``codec``), without the record's type/key/tombstone fields.
"""

from __future__ import annotations

from typing import Iterable

from offsets_store.codec import CONSUMER_GROUP_TYPES

_NOT_VALUE = ("type", "group_id", "member_id", "regular_expression", "tombstone", "value_version")


def is_consumer_group_record(record: dict) -> bool:
    return record.get("type") in CONSUMER_GROUP_TYPES


def _value(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in _NOT_VALUE}


def consumer_group_states(records: Iterable[dict]) -> dict[str, dict]:
    """Every consumer-protocol group in ``records``, by group id."""
    groups: dict[str, dict] = {}
    for r in records:
        if not is_consumer_group_record(r) or r.get("tombstone"):
            continue
        g = groups.setdefault(
            r["group_id"],
            {
                "group_id": r["group_id"],
                "group_epoch": None,
                "metadata_hash": 0,
                "assignment_epoch": None,
                "topic_names": {},
                "regular_expressions": {},
                "members": {},
            },
        )
        kind, value = r["type"], _value(r)
        if kind == "consumer_group_metadata":
            g["group_epoch"], g["metadata_hash"] = value["epoch"], value.get("metadataHash", 0)
        elif kind == "consumer_group_target_assignment_metadata":
            g["assignment_epoch"] = value["assignmentEpoch"]
        elif kind == "consumer_group_partition_metadata":
            g["topic_names"] = {t["topicId"]: t["topicName"] for t in value["topics"]}
        elif kind == "consumer_group_regular_expression":
            g["regular_expressions"][r["regular_expression"]] = value
        else:
            member = g["members"].setdefault(
                r["member_id"], {"metadata": None, "target_assignment": None, "current_assignment": None}
            )
            if kind == "consumer_group_member_metadata":
                member["metadata"] = value
            elif kind == "consumer_group_target_assignment_member":
                member["target_assignment"] = value["topicPartitions"]
            else:
                member["current_assignment"] = value
    return groups


def consumer_group_state(records: Iterable[dict], group_id: str) -> dict | None:
    """The group's state, or None when no live consumer-group record is left for it."""
    return consumer_group_states(r for r in records if r.get("group_id") == group_id).get(group_id)
