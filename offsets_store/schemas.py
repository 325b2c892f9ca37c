"""The ``__consumer_offsets`` record schemas, as data (from Kafka's message JSON definitions).

A field is ``(name, type, first_version, last_version, default)``; ``last_version`` None means "and later". Types:
int16/int32/int64, string, nullable_string, bytes, nullable_bytes, ``[T]`` for arrays of a primitive, or a nested
``Struct`` for arrays of structs. A struct's ``flexible`` is the first version using compact encodings and tagged
fields (None: never).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    name: str
    type: Any                  # str, ("array", elem) with elem a str or Struct
    first: int = 0
    last: int | None = None
    default: Any = None

    def present(self, version: int) -> bool:
        return version >= self.first and (self.last is None or version <= self.last)


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]
    versions: tuple[int, int]
    flexible: int | None = None

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible


def array(elem) -> tuple:
    return ("array", elem)


OFFSET_COMMIT_KEY = Struct("OffsetCommitKey", (
    Field("group", "string"), Field("topic", "string"), Field("partition", "int32"),
), versions=(0, 1))

GROUP_METADATA_KEY = Struct("GroupMetadataKey", (Field("group", "string"),), versions=(2, 2))

OFFSET_COMMIT_VALUE = Struct("OffsetCommitValue", (
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", 3, None, -1),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", 1, 1, -1),
), versions=(0, 4), flexible=4)

MEMBER_METADATA = Struct("MemberMetadata", (
    Field("memberId", "string"),
    Field("groupInstanceId", "nullable_string", 3, None, None),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", 1, None, -1),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
), versions=(0, 4), flexible=4)

GROUP_METADATA_VALUE = Struct("GroupMetadataValue", (
    Field("protocolType", "string"),
    Field("generation", "int32"),
    Field("protocol", "nullable_string"),
    Field("leader", "nullable_string"),
    Field("currentStateTimestamp", "int64", 2, None, -1),
    Field("members", array(MEMBER_METADATA)),
), versions=(0, 4), flexible=4)

TOPIC_PARTITIONS = Struct("TopicPartition", (
    Field("topic", "string"), Field("partitions", array("int32")),
), versions=(0, 3))

CONSUMER_PROTOCOL_SUBSCRIPTION = Struct("ConsumerProtocolSubscription", (
    Field("topics", array("string")),
    Field("userData", "nullable_bytes"),
    Field("ownedPartitions", array(TOPIC_PARTITIONS), 1, None, ()),
    Field("generationId", "int32", 2, None, -1),
    Field("rackId", "nullable_string", 3, None, None),
), versions=(0, 3))

CONSUMER_PROTOCOL_ASSIGNMENT = Struct("ConsumerProtocolAssignment", (
    Field("assignedPartitions", array(TOPIC_PARTITIONS)),
    Field("userData", "nullable_bytes"),
), versions=(0, 3))

# Record key version -> (key schema, value schema). Other key versions are KIP-848 / share-group records.
RECORD_TYPES = {0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE), 1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
                2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE)}
KNOWN_OTHER_KEYS = {3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
                    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
                    8: "ConsumerGroupCurrentMemberAssignment", 9: "ShareGroupPartitionMetadata",
                    10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata"}

# Our own bookkeeping record in the Kafka backend's topic: the last micro-batch applied, so a replay after a restart
# is a no-op. Its key version is far beyond Kafka's, so Kafka's readers (and ours) report it as an unknown record.
BATCH_MARKER_KEY_VERSION = 0x7FFF
BATCH_MARKER_KEY = Struct("RebalanceTrackerBatchMarkerKey", (Field("name", "string"),),
                          versions=(BATCH_MARKER_KEY_VERSION, BATCH_MARKER_KEY_VERSION))
BATCH_MARKER_VALUE = Struct("RebalanceTrackerBatchMarkerValue", (Field("batchId", "int64"),), versions=(0, 0))
KNOWN_OTHER_KEYS[BATCH_MARKER_KEY_VERSION] = "RebalanceTrackerBatchMarker"
