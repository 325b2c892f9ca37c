"""``__consumer_offsets`` records <-> the coordinator's record dicts (see docs/outputs.md).

``encode_record`` writes a new record (one without versions) as a current broker writes it: OffsetCommitKey v1
with OffsetCommitValue v4 (Kafka 4.1+; v1 when the commit carried an explicit expire timestamp; Kafka 4.0 and
earlier write v3: give ``"value_version": 3``), GroupMetadataKey v2 with
GroupMetadataValue v3 whose members embed ConsumerProtocolSubscription / ConsumerProtocolAssignment v3.
``decode_record`` reads every version, reports the share-group and streams-group record types it does not model as
``{"type": "unknown", "key_version": N, "record_type": "<Kafka name>"}``, and raises only ``CodecError``. A decoded
record keeps its versions (``key_version``, ``value_version``, the embedded ``version``), so encoding it again gives
the bytes it was read from. Fields an old version lacks take the value Kafka's loader gives them (a v0 member's
rebalance timeout is its session timeout). An offset commit has ``"topic_id"`` (a Kafka ``Uuid`` string) only when
its value carries one (v4, when the committer named the topic by id); encoded, it goes to v4's tagged field.

KIP-848 consumer-group records (the new consumer protocol; key = int16 record type + key fields, value = int16
version 0 + flexible body). Key fields are snake_case like the classic records' (``group_id``, ``member_id``,
``regular_expression``; ``groupId``/``memberId``/``regularExpression`` are accepted too); value fields sit next to
them under Kafka's JSON field names (lowerCamelCase of the schema's names). Topic ids are Kafka ``Uuid`` strings
(URL-safe base64, 22 characters, what ``Uuid.toString()`` prints; a hyphenated UUID, a ``uuid.UUID`` or 16 bytes are
accepted when encoding), ``bytes`` fields base64 strings. Fields marked "= d" may be left out (Kafka's default);
tagged fields are written only when not at their default::

    {"type": "consumer_group_metadata", "group_id": g,                                   # record type 3
     "epoch": int, "metadataHash": int = 0, "creationTimeMs": int = -1}
    {"type": "consumer_group_partition_metadata", "group_id": g,                         # 4 (not written since 4.1)
     "topics": [{"topicId": uuid, "topicName": str, "numPartitions": int,
                 "partitionMetadata": [{"partition": int, "racks": [str]}] = []}]}
    {"type": "consumer_group_member_metadata", "group_id": g, "member_id": m,            # 5
     "instanceId": str|None, "rackId": str|None, "clientId": str, "clientHost": str,
     "subscribedTopicNames": [str], "subscribedTopicRegex": str|None, "rebalanceTimeoutMs": int = -1,
     "serverAssignor": str|None,
     "classicMemberMetadata": None | {"sessionTimeoutMs": int,
                                      "supportedProtocols": [{"name": str, "metadata": base64}]} = None}
    {"type": "consumer_group_target_assignment_metadata", "group_id": g,                 # 6
     "assignmentEpoch": int, "assignmentTimestamp": int = 0}
    {"type": "consumer_group_target_assignment_member", "group_id": g, "member_id": m,   # 7
     "topicPartitions": [{"topicId": uuid, "partitions": [int]}]}
    {"type": "consumer_group_current_member_assignment", "group_id": g, "member_id": m,  # 8
     "memberEpoch": int, "previousMemberEpoch": int, "state": int (0 stable, 1 unrevoked, 2 unreleased partitions),
     "assignedPartitions": [{"topicId": uuid, "partitions": [int], "assignmentEpochs": [int]|None = None}],
     "partitionsPendingRevocation": [same]}
    {"type": "consumer_group_regular_expression", "group_id": g, "regular_expression": r,  # 16
     "topics": [str], "version": int, "timestamp": int}

Every record also has ``"tombstone": bool`` (True: the key alone, value null, which deletes the key); decoded values
carry ``"value_version": 0``. Tagged fields of a newer schema are kept under ``"_unknownTaggedFields"``
(``[[tag, base64], ...]``, in the struct they were read in) and written back in place, so ``encode_record(
decode_record(k, v)) == (k, v)`` for anything Kafka writes. A tagged field Kafka wrote is never at its default (the
writer skips those), so it comes back too.
"""

from __future__ import annotations

import base64
import struct
from itertools import groupby

from offsets_store import schemas as s
from offsets_store.wire import UNKNOWN_TAGS, ZERO_UUID, CodecError, Reader, decode, encode, uuid_bytes

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 4
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
CONSUMER_PROTOCOL_VERSION = 3

__all__ = [
    "CodecError",
    "encode_record",
    "decode_record",
    "record_key",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "CONSUMER_GROUP_TYPES",
    "record_group",
    "record_identity",
]

# record dict type -> (record type = key version, the key's record-dict fields after group_id)
CONSUMER_GROUP_TYPES = {
    "consumer_group_metadata": (s.CONSUMER_GROUP_METADATA, ()),
    "consumer_group_partition_metadata": (s.CONSUMER_GROUP_PARTITION_METADATA, ()),
    "consumer_group_member_metadata": (s.CONSUMER_GROUP_MEMBER_METADATA, ("member_id",)),
    "consumer_group_target_assignment_metadata": (s.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, ()),
    "consumer_group_target_assignment_member": (s.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, ("member_id",)),
    "consumer_group_current_member_assignment": (s.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, ("member_id",)),
    "consumer_group_regular_expression": (s.CONSUMER_GROUP_REGULAR_EXPRESSION, ("regular_expression",)),
}
_TYPE_OF_KEY_VERSION = {version: kind for kind, (version, _) in CONSUMER_GROUP_TYPES.items()}
_KEY_FIELDS = {"group_id": "groupId", "member_id": "memberId", "regular_expression": "regularExpression"}


# ------------------------------------------------------------------ keys
def record_key(record: dict) -> bytes:
    if record["type"] == "offset_commit":
        return encode(
            s.OFFSET_COMMIT_KEY,
            record.get("key_version", OFFSET_KEY_VERSION),
            {"group": record["group_id"], "topic": record["topic"], "partition": record["partition"]},
        )
    if record["type"] == "group_metadata":
        return encode(s.GROUP_METADATA_KEY, GROUP_KEY_VERSION, {"group": record["group_id"]})
    if record["type"] in CONSUMER_GROUP_TYPES:
        version, fields = CONSUMER_GROUP_TYPES[record["type"]]
        return encode(
            s.RECORD_TYPES[version][0], version, {_KEY_FIELDS[f]: _key_field(record, f) for f in ("group_id",) + fields}
        )
    raise ValueError(f"not a __consumer_offsets record: {record['type']!r}")


def record_identity(record: dict) -> tuple:
    """What ``record_key`` encodes, as a tuple: two records have one identity exactly when their keys are the same
    bytes (so the later replaces the earlier under compaction). Cheaper than the bytes, for compacting in memory."""
    kind = record["type"]
    if kind == "offset_commit":
        return (
            kind,
            record.get("key_version", OFFSET_KEY_VERSION),
            record["group_id"],
            record["topic"],
            int(record["partition"]),
        )
    if kind == "group_metadata":
        return kind, record["group_id"]
    if kind in CONSUMER_GROUP_TYPES:
        return (kind,) + tuple(_key_field(record, f) for f in ("group_id",) + CONSUMER_GROUP_TYPES[kind][1])
    raise ValueError(f"not a __consumer_offsets record: {kind!r}")


# ------------------------------------------------------------------ records
def encode_record(record: dict) -> tuple[bytes, bytes | None]:
    """(key, value); value None is a tombstone."""
    if (
        record["type"] == "offset_commit"
        and not record.get("tombstone")
        and record.get("expire_timestamp") in (None, -1)
        and UNKNOWN_TAGS not in record
        and record.get("value_version", OFFSET_VALUE_VERSION) == OFFSET_VALUE_VERSION
        and record.get("key_version", OFFSET_KEY_VERSION) == OFFSET_KEY_VERSION
    ):
        return _fast_offset_commit(record)
    key = record_key(record)
    if record.get("tombstone"):
        return key, None
    if record["type"] in CONSUMER_GROUP_TYPES:
        value_schema = s.RECORD_TYPES[CONSUMER_GROUP_TYPES[record["type"]][0]][1]
        return key, encode(value_schema, record.get("value_version", 0), _to_wire(value_schema, record))
    if record["type"] == "offset_commit":
        expire = int(record.get("expire_timestamp", -1) if record.get("expire_timestamp") is not None else -1)
        version = record.get("value_version")
        if version is None:
            version = OFFSET_VALUE_WITH_EXPIRY if expire != -1 else OFFSET_VALUE_VERSION
        return key, encode(
            s.OFFSET_COMMIT_VALUE,
            version,
            {
                "offset": int(record["offset"]),
                "leaderEpoch": int(record.get("leader_epoch", -1)),
                "metadata": record.get("metadata") or "",
                "commitTimestamp": int(record["commit_timestamp"]),
                "expireTimestamp": expire,
                "topicId": record.get("topic_id") or ZERO_UUID,
                **_tags_to_wire(record),
            },
        )
    consumer = record.get("protocol_type") == "consumer"
    members = []
    for m in record.get("members") or []:
        sub, assignment = m.get("subscription") or {}, m.get("assignment") or {}
        members.append(
            {
                "memberId": m["member_id"],
                "groupInstanceId": m.get("group_instance_id"),
                "clientId": m.get("client_id", ""),
                "clientHost": m.get("client_host", ""),
                "rebalanceTimeout": int(m.get("rebalance_timeout", -1)),
                "sessionTimeout": int(m["session_timeout"]),
                "subscription": _embedded_bytes(encode_subscription, sub, consumer),
                "assignment": _embedded_bytes(encode_assignment, assignment, consumer),
                **_tags_to_wire(m),
            }
        )
    return key, encode(
        s.GROUP_METADATA_VALUE,
        record.get("value_version", GROUP_VALUE_VERSION),
        {
            "protocolType": record.get("protocol_type") or "",
            "generation": int(record["generation"]),
            "protocol": record.get("protocol"),
            "leader": record.get("leader"),
            "currentStateTimestamp": int(record.get("current_state_timestamp", -1)),
            "members": members,
            **_tags_to_wire(record),
        },
    )


def _tags_to_wire(part: dict) -> dict:
    """A record's (or member's) tagged fields of a newer schema, as read (base64), back to bytes for the writer."""
    tags = part.get(UNKNOWN_TAGS)
    return {UNKNOWN_TAGS: [(int(tag), _b64decode_strict(data)) for tag, data in tags]} if tags else {}


def _tags_from_wire(value: dict) -> dict:
    """Tagged fields of a newer schema (flexible versions), kept as base64 so the record writes back as it was read --
    Kafka's generated classes keep them likewise (``_unknownTaggedFields``)."""
    tags = value.get(UNKNOWN_TAGS)
    return {UNKNOWN_TAGS: [[tag, _b64(data)] for tag, data in tags]} if tags else {}


_KEY_HEAD = struct.Struct(">hh")
_H, _I = struct.Struct(">h"), struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")
_Q = struct.Struct(">q")


def _fast_offset_commit(record: dict) -> tuple[bytes, bytes]:
    """OffsetCommitKey v1 + OffsetCommitValue v4 without the generic walker: the hot path of every commit.
    Byte-identical to ``encode`` over the schemas (tested)."""
    group, topic = record["group_id"].encode("utf-8"), record["topic"].encode("utf-8")
    metadata = (record.get("metadata") or "").encode("utf-8")
    if max(len(group), len(topic), len(metadata)) > 0x7FFF:
        raise ValueError("a string of an offset commit is longer than Kafka's 32767 bytes")
    key = b"".join(
        (
            _KEY_HEAD.pack(OFFSET_KEY_VERSION, len(group)),
            group,
            _H.pack(len(topic)),
            topic,
            _I.pack(int(record["partition"])),
        )
    )
    topic_id = uuid_bytes(record["topic_id"]) if record.get("topic_id") else bytes(16)
    # tagged fields: topicId (tag 0, 16 bytes), left out when zero (Kafka's "unknown", its default)
    tags = b"\x00" if topic_id == bytes(16) else b"\x01\x00\x10" + topic_id
    head = _VALUE_HEAD.pack(OFFSET_VALUE_VERSION, int(record["offset"]), int(record.get("leader_epoch", -1)))
    value = b"".join(
        (head, _uvarint_bytes(len(metadata) + 1), metadata, _Q.pack(int(record["commit_timestamp"])), tags)
    )
    return key, value


def _uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_record(key: bytes, value: bytes | None) -> dict:
    """The record dict for a key/value pair read from ``__consumer_offsets`` (value None = tombstone)."""
    if key is None or len(key) < 2:
        raise CodecError("record key shorter than its version")
    key_version = Reader(key).int("int16")
    if key_version not in s.RECORD_TYPES:
        return {
            "type": "unknown",
            "key_version": key_version,
            "record_type": s.KNOWN_OTHER_KEYS.get(key_version, "unknown"),
            "tombstone": value is None,
        }
    key_schema, value_schema = s.RECORD_TYPES[key_version]
    _, k = decode(key_schema, key)
    if key_version in _TYPE_OF_KEY_VERSION:
        record = {"type": _TYPE_OF_KEY_VERSION[key_version]}
        record.update((snake, k[camel]) for snake, camel in _KEY_FIELDS.items() if camel in k)
        if value is None:
            return {**record, "tombstone": True}
        version, v = decode(value_schema, value)
        return {**record, **_from_wire(value_schema, v), "tombstone": False, "value_version": version}
    if key_schema is s.OFFSET_COMMIT_KEY:
        record = {
            "type": "offset_commit",
            "group_id": k["group"],
            "topic": k["topic"],
            "partition": k["partition"],
            "key_version": key_version,
        }
        if value is None:
            return {**record, "tombstone": True}
        version, v = decode(value_schema, value)
        topic_id = {"topic_id": v["topicId"]} if v.get("topicId", ZERO_UUID) != ZERO_UUID else {}
        return {
            **record,
            "offset": v["offset"],
            "leader_epoch": v["leaderEpoch"],
            "metadata": v["metadata"],
            "commit_timestamp": v["commitTimestamp"],
            "expire_timestamp": v["expireTimestamp"],
            **topic_id,
            "tombstone": False,
            "value_version": version,
            **_tags_from_wire(v),
        }
    if value is None:
        return {"type": "group_metadata", "group_id": k["group"], "tombstone": True}
    version, v = decode(value_schema, value)
    consumer = v["protocolType"] == "consumer"
    members = []
    for m in v["members"]:
        # v0 has no rebalance timeout: Kafka's loader takes the session timeout (which bounded a 0.9 join round).
        rebalance_timeout = m["sessionTimeout"] if version == 0 else m["rebalanceTimeout"]
        members.append(
            {
                "member_id": m["memberId"],
                "group_instance_id": m["groupInstanceId"],
                "client_id": m["clientId"],
                "client_host": m["clientHost"],
                "rebalance_timeout": rebalance_timeout,
                "session_timeout": m["sessionTimeout"],
                "subscription": _embedded(decode_subscription, m["subscription"], consumer),
                "assignment": _embedded(decode_assignment, m["assignment"], consumer),
                **_tags_from_wire(m),
            }
        )
    return {
        "type": "group_metadata",
        "group_id": k["group"],
        "tombstone": False,
        "protocol_type": v["protocolType"],
        "generation": v["generation"],
        "protocol": v["protocol"],
        "leader": v["leader"],
        "current_state_timestamp": v["currentStateTimestamp"],
        "members": members,
        "value_version": version,
        **_tags_from_wire(v),
    }


# ------------------------------------------------------------------ KIP-848 values: record dict <-> wire dict
def record_group(record: dict) -> str:
    """The record's group id (``group_id``; a KIP-848 record may spell it ``groupId``)."""
    return record["group_id"] if "group_id" in record else record["groupId"]


def _key_field(record: dict, name: str) -> str:
    value = record.get(name, record.get(_KEY_FIELDS[name]))
    if value is None:
        raise ValueError(f"a {record['type']} record needs {name}")
    return value


def _to_wire(schema: s.Struct, value: dict) -> dict:
    """Only the schema's fields (a record's own keys such as type or group_id are not part of the value); bytes from
    base64, unknown tagged fields' data too."""
    out = {}
    for f in schema.fields:
        if f.name in value:
            out[f.name] = _convert(f.type, value[f.name], _to_wire, _b64decode_strict)
    return out | _tags_to_wire(value)


def _from_wire(schema: s.Struct, value: dict) -> dict:
    return {f.name: _convert(f.type, value[f.name], _from_wire, _b64) for f in schema.fields} | _tags_from_wire(value)


def _convert(kind, v, struct_fn, bytes_fn):
    if v is None:
        return None
    if isinstance(kind, tuple):
        form, elem = kind
        if form.endswith("struct"):
            return struct_fn(elem, v)
        return [
            _convert(elem, item, struct_fn, bytes_fn) if not isinstance(elem, s.Struct) else struct_fn(elem, item)
            for item in v
        ]
    return bytes_fn(v) if kind in ("bytes", "nullable_bytes") else v


def _b64decode_strict(data) -> bytes:
    """bytes as they are, a str as base64 (a record dict may hold either; decoding gives base64)."""
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    try:
        return base64.b64decode(data, validate=True)
    except (ValueError, TypeError):
        raise ValueError(f"not base64: {data!r}") from None


def _embedded(decoder, data: bytes, consumer: bool) -> dict:
    """Members' protocol bytes: decoded for consumer groups; kept raw (base64) otherwise or when unreadable. The
    broker stores these bytes as the client sent them; when our writer would lay them out differently (partitions
    in another order, a topic with no partitions), ``raw`` keeps them too, so writing the record back is exact."""
    if consumer:
        try:
            decoded = decoder(data)
        except CodecError:
            pass
        else:
            encoder = encode_subscription if decoder is decode_subscription else encode_assignment
            if encoder(decoded) != data:
                decoded["raw"] = _b64(data)
            return decoded
    return {"raw": _b64(data)}


def _embedded_bytes(encoder, embedded: dict, consumer: bool) -> bytes:
    if "raw" in embedded or not consumer:  # the bytes as read win over their decoded fields
        return _b64decode(embedded.get("raw"))
    return encoder(embedded)


def _b64decode(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _b64decode_nullable(text: str | None) -> bytes | None:
    """user_data keeps Kafka's distinction between null and empty bytes ("" round-trips as "")."""
    return None if text is None else base64.b64decode(text)


# ------------------------------------------------------------------ the embedded consumer protocol
def _by_topic(partitions) -> list[dict]:
    pairs = sorted((t, int(p)) for t, p in partitions)
    return [{"topic": t, "partitions": [p for _, p in group]} for t, group in groupby(pairs, key=lambda tp: tp[0])]


def encode_subscription(sub: dict, version: int | None = None) -> bytes:
    """At ``version``, else the version the subscription was decoded from, else the newest."""
    version = sub.get("version", CONSUMER_PROTOCOL_VERSION) if version is None else version
    return encode(
        s.CONSUMER_PROTOCOL_SUBSCRIPTION,
        version,
        {
            "topics": list(sub.get("topics") or []),
            "userData": _b64decode_nullable(sub.get("user_data")),
            "ownedPartitions": _by_topic(sub.get("owned_partitions") or []),
            "generationId": int(sub.get("generation", -1) if sub.get("generation") is not None else -1),
            "rackId": sub.get("rack"),
        },
    )


def decode_subscription(data: bytes) -> dict:
    """A newer version than we know reads with the newest layout we know (Kafka's checkSubscriptionVersion)."""
    version, v = decode(s.CONSUMER_PROTOCOL_SUBSCRIPTION, data, newer_as_newest=True)
    return {
        "topics": v["topics"],
        "user_data": _b64(v["userData"]),
        "owned_partitions": [[tp["topic"], p] for tp in v["ownedPartitions"] or [] for p in tp["partitions"]],
        "generation": v["generationId"],
        "rack": v["rackId"],
        "version": version,
    }


def encode_assignment(assignment: dict, version: int | None = None) -> bytes:
    """At ``version``, else the version the assignment was decoded from, else the newest."""
    version = assignment.get("version", CONSUMER_PROTOCOL_VERSION) if version is None else version
    return encode(
        s.CONSUMER_PROTOCOL_ASSIGNMENT,
        version,
        {
            "assignedPartitions": _by_topic(assignment.get("partitions") or []),
            "userData": _b64decode_nullable(assignment.get("user_data")),
        },
    )


def decode_assignment(data: bytes) -> dict:
    """A newer version than we know reads with the newest layout we know (Kafka's checkAssignmentVersion)."""
    version, v = decode(s.CONSUMER_PROTOCOL_ASSIGNMENT, data, newer_as_newest=True)
    return {
        "partitions": [[tp["topic"], p] for tp in v["assignedPartitions"] or [] for p in tp["partitions"]],
        "user_data": _b64(v["userData"]),
        "version": version,
    }


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
