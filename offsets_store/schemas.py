"""The ``__consumer_offsets`` record schemas, as data (from Kafka's message JSON definitions).

A field is ``(name, type, first_version, last_version, default, tag)``; ``last_version`` None means "and later".
Types: int8/int16/int32/int64, uuid, string, nullable_string, bytes, nullable_bytes, ``array(T)`` /
``nullable_array(T)`` with T a primitive or a ``Struct``, ``struct(S)`` / ``nullable_struct(S)`` for one nested
struct. A struct's ``flexible`` is the first version using compact encodings and tagged fields (None: never). A field
with a ``tag`` is a tagged field (in every flexible version it exists in: all Kafka's coordinator records use
``"taggedVersions": "0+"``), written only when it is not its ``default``. ``REQUIRED``: the encoder needs a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()  # no default: a record dict must give the field


@dataclass(frozen=True)
class Field:
    name: str
    type: Any  # str, ("array" | "nullable_array" | "struct" | "nullable_struct", elem)
    first: int = 0
    last: int | None = None
    default: Any = None
    tag: int | None = None

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


def nullable_array(elem) -> tuple:
    return ("nullable_array", elem)


def nullable_struct(elem: "Struct") -> tuple:
    return ("nullable_struct", elem)


OFFSET_COMMIT_KEY = Struct(
    "OffsetCommitKey",
    (
        Field("group", "string"),
        Field("topic", "string"),
        Field("partition", "int32"),
    ),
    versions=(0, 1),
)

GROUP_METADATA_KEY = Struct("GroupMetadataKey", (Field("group", "string"),), versions=(2, 2))

OFFSET_COMMIT_VALUE = Struct(
    "OffsetCommitValue",
    (
        Field("offset", "int64"),
        Field("leaderEpoch", "int32", 3, None, -1),
        Field("metadata", "string"),
        Field("commitTimestamp", "int64"),
        Field("expireTimestamp", "int64", 1, 1, -1),
        Field("topicId", "uuid", 4, None, "AAAAAAAAAAAAAAAAAAAAAA", tag=0),  # Kafka 4.1+: absent when unknown
    ),
    versions=(0, 4),
    flexible=4,
)

MEMBER_METADATA = Struct(
    "MemberMetadata",
    (
        Field("memberId", "string"),
        Field("groupInstanceId", "nullable_string", 3, None, None),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("rebalanceTimeout", "int32", 1, None, -1),
        Field("sessionTimeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ),
    versions=(0, 4),
    flexible=4,
)

GROUP_METADATA_VALUE = Struct(
    "GroupMetadataValue",
    (
        Field("protocolType", "string"),
        Field("generation", "int32"),
        Field("protocol", "nullable_string"),
        Field("leader", "nullable_string"),
        Field("currentStateTimestamp", "int64", 2, None, -1),
        Field("members", array(MEMBER_METADATA)),
    ),
    versions=(0, 4),
    flexible=4,
)

TOPIC_PARTITIONS = Struct(
    "TopicPartition",
    (
        Field("topic", "string"),
        Field("partitions", array("int32")),
    ),
    versions=(0, 3),
)

CONSUMER_PROTOCOL_SUBSCRIPTION = Struct(
    "ConsumerProtocolSubscription",
    (
        Field("topics", array("string")),
        Field("userData", "nullable_bytes"),
        Field("ownedPartitions", array(TOPIC_PARTITIONS), 1, None, ()),
        Field("generationId", "int32", 2, None, -1),
        Field("rackId", "nullable_string", 3, None, None),
    ),
    versions=(0, 3),
)

CONSUMER_PROTOCOL_ASSIGNMENT = Struct(
    "ConsumerProtocolAssignment",
    (
        Field("assignedPartitions", array(TOPIC_PARTITIONS)),
        Field("userData", "nullable_bytes"),
    ),
    versions=(0, 3),
)


# ------------------------------------------------------------------ KIP-848 consumer groups (the new protocol)
# From group-coordinator/src/main/resources/common/message/ConsumerGroup*.json (apache/kafka trunk, 2025-2026).
# Keys are "coordinator-key" messages: an int16 record type (their apiKey) then the body at version 0, never flexible,
# i.e. the same bytes as the older "key version = record type" layout. Values are "coordinator-value" messages: int16
# version (0, the only one) then the body, flexible from version 0 (compact strings/arrays, tagged fields).
def _r(name: str, kind, default=REQUIRED, tag: int | None = None) -> Field:
    return Field(name, kind, 0, None, default, tag)


def _key(name: str, record_type: int, *fields: str) -> Struct:
    return Struct(name, tuple(_r(f, "string") for f in fields), versions=(record_type, record_type))


def _value(name: str, *fields: Field) -> Struct:
    return Struct(name, fields, versions=(0, 0), flexible=0)


CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

CONSUMER_GROUP_METADATA_KEY = _key("ConsumerGroupMetadataKey", 3, "groupId")
CONSUMER_GROUP_METADATA_VALUE = _value(
    "ConsumerGroupMetadataValue",
    _r("epoch", "int32"),
    _r("metadataHash", "int64", 0, tag=0),  # 4.1 (KIP-1101): hash of the subscribed topics' metadata
    _r("creationTimeMs", "int64", -1, tag=1),
)  # trunk (KIP-1282): when the group was created

# Replaced by ConsumerGroupMetadataValue.metadataHash in 4.1; still read (and deleted) by newer brokers.
PARTITION_METADATA = _value("PartitionMetadata", _r("partition", "int32"), _r("racks", array("string")))
TOPIC_METADATA = _value(
    "TopicMetadata",
    _r("topicId", "uuid"),
    _r("topicName", "string"),
    _r("numPartitions", "int32"),
    _r("partitionMetadata", array(PARTITION_METADATA), ()),
)  # not written since 4.0: empty
CONSUMER_GROUP_PARTITION_METADATA_KEY = _key("ConsumerGroupPartitionMetadataKey", 4, "groupId")
CONSUMER_GROUP_PARTITION_METADATA_VALUE = _value(
    "ConsumerGroupPartitionMetadataValue", _r("topics", array(TOPIC_METADATA))
)

CLASSIC_PROTOCOL = _value("ClassicProtocol", _r("name", "string"), _r("metadata", "bytes"))
CLASSIC_MEMBER_METADATA = _value(
    "ClassicMemberMetadata", _r("sessionTimeoutMs", "int32"), _r("supportedProtocols", array(CLASSIC_PROTOCOL))
)
CONSUMER_GROUP_MEMBER_METADATA_KEY = _key("ConsumerGroupMemberMetadataKey", 5, "groupId", "memberId")
CONSUMER_GROUP_MEMBER_METADATA_VALUE = _value(
    "ConsumerGroupMemberMetadataValue",
    _r("instanceId", "nullable_string"),
    _r("rackId", "nullable_string"),
    _r("clientId", "string"),
    _r("clientHost", "string"),
    _r("subscribedTopicNames", array("string")),
    _r("subscribedTopicRegex", "nullable_string"),
    _r("rebalanceTimeoutMs", "int32", -1),
    _r("serverAssignor", "nullable_string"),
    # Members on the classic protocol. Kafka's generated class defaults this to an empty struct, not to the null its
    # schema names: a consumer-protocol member's null is written (tag 0, one byte 0), an empty struct is not.
    _r(
        "classicMemberMetadata",
        nullable_struct(CLASSIC_MEMBER_METADATA),
        {"sessionTimeoutMs": 0, "supportedProtocols": []},
        tag=0,
    ),
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _key("ConsumerGroupTargetAssignmentMetadataKey", 6, "groupId")
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _value(
    "ConsumerGroupTargetAssignmentMetadataValue",
    _r("assignmentEpoch", "int32"),
    _r("assignmentTimestamp", "int64", 0, tag=0),
)  # 4.3 (KIP-1263): when the assignment was computed

TARGET_TOPIC_PARTITION = _value("TopicPartition", _r("topicId", "uuid"), _r("partitions", array("int32")))
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _key("ConsumerGroupTargetAssignmentMemberKey", 7, "groupId", "memberId")
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _value(
    "ConsumerGroupTargetAssignmentMemberValue", _r("topicPartitions", array(TARGET_TOPIC_PARTITION))
)

CURRENT_TOPIC_PARTITIONS = _value(
    "TopicPartitions",
    _r("topicId", "uuid"),
    _r("partitions", array("int32")),
    _r("assignmentEpochs", nullable_array("int32"), None, tag=0),
)  # trunk (KIP-1251): epoch each was assigned at
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _key("ConsumerGroupCurrentMemberAssignmentKey", 8, "groupId", "memberId")
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    _r("memberEpoch", "int32"),
    _r("previousMemberEpoch", "int32"),
    _r("state", "int8"),  # MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    _r("assignedPartitions", array(CURRENT_TOPIC_PARTITIONS)),
    _r("partitionsPendingRevocation", array(CURRENT_TOPIC_PARTITIONS)),
)

CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = _key("ConsumerGroupRegularExpressionKey", 16, "groupId", "regularExpression")
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = _value(
    "ConsumerGroupRegularExpressionValue",
    _r("topics", array("string")),
    _r("version", "int64"),
    _r("timestamp", "int64"),
)

# Record key version (the record type) -> (key schema, value schema).
RECORD_TYPES = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: (CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE),
    4: (CONSUMER_GROUP_PARTITION_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: (CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    16: (CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
}
# Record types we recognise but do not decode (Kafka's CoordinatorRecordType): share groups (KIP-932) and streams
# groups (KIP-1071). 9 and 18 were dropped by later Kafka versions, but older brokers wrote them.
KNOWN_OTHER_KEYS = {
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
    24: "StreamsGroupTargetAssignmentResolvedTopicIds",
}

# Our own bookkeeping record in the Kafka backend's topic: the last micro-batch applied, so a replay after a restart
# is a no-op. Its key version is far beyond Kafka's, so Kafka's readers (and ours) report it as an unknown record.
BATCH_MARKER_KEY_VERSION = 0x7FFF
BATCH_MARKER_KEY = Struct(
    "RebalanceTrackerBatchMarkerKey",
    (Field("name", "string"),),
    versions=(BATCH_MARKER_KEY_VERSION, BATCH_MARKER_KEY_VERSION),
)
BATCH_MARKER_VALUE = Struct("RebalanceTrackerBatchMarkerValue", (Field("batchId", "int64"),), versions=(0, 0))
KNOWN_OTHER_KEYS[BATCH_MARKER_KEY_VERSION] = "RebalanceTrackerBatchMarker"
