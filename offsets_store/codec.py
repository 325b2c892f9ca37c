"""``__consumer_offsets`` records <-> the coordinator's record dicts (see the README's "Outputs").

``encode_record`` writes a new record (one without versions) as a current broker writes it: OffsetCommitKey v1
with OffsetCommitValue v3 (v1 when the commit carried an explicit expire timestamp), GroupMetadataKey v2 with
GroupMetadataValue v3 whose members embed ConsumerProtocolSubscription / ConsumerProtocolAssignment v3.
``decode_record`` reads every version, reports the KIP-848 and share-group record types it does not model as
``{"type": "unknown"}``, and raises only ``CodecError``. A decoded record keeps its versions (``key_version``,
``value_version``, the embedded ``version``), so encoding it again gives the bytes it was read from. Fields an old
version lacks take the value Kafka's loader gives them (a v0 member's rebalance timeout is its session timeout).
"""
from __future__ import annotations

import base64
import struct
from itertools import groupby

from offsets_store import schemas as s
from offsets_store.wire import CodecError, Reader, decode, encode

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
CONSUMER_PROTOCOL_VERSION = 3

__all__ = ["CodecError", "encode_record", "decode_record", "record_key", "encode_subscription",
           "decode_subscription", "encode_assignment", "decode_assignment"]


# ------------------------------------------------------------------ keys
def record_key(record: dict) -> bytes:
    if record["type"] == "offset_commit":
        return encode(s.OFFSET_COMMIT_KEY, record.get("key_version", OFFSET_KEY_VERSION),
                      {"group": record["group_id"], "topic": record["topic"], "partition": record["partition"]})
    if record["type"] == "group_metadata":
        return encode(s.GROUP_METADATA_KEY, GROUP_KEY_VERSION, {"group": record["group_id"]})
    raise ValueError(f"not a __consumer_offsets record: {record['type']!r}")


# ------------------------------------------------------------------ records
def encode_record(record: dict) -> tuple[bytes, bytes | None]:
    """(key, value); value None is a tombstone."""
    if record["type"] == "offset_commit" and not record.get("tombstone") and \
            record.get("expire_timestamp") in (None, -1) and record.get("value_version", 3) == 3 and \
            record.get("key_version", OFFSET_KEY_VERSION) == OFFSET_KEY_VERSION:
        return _fast_offset_commit(record)
    key = record_key(record)
    if record.get("tombstone"):
        return key, None
    if record["type"] == "offset_commit":
        expire = int(record.get("expire_timestamp", -1) if record.get("expire_timestamp") is not None else -1)
        version = record.get("value_version")
        if version is None:
            version = OFFSET_VALUE_WITH_EXPIRY if expire != -1 else OFFSET_VALUE_VERSION
        return key, encode(s.OFFSET_COMMIT_VALUE, version, {
            "offset": int(record["offset"]), "leaderEpoch": int(record.get("leader_epoch", -1)),
            "metadata": record.get("metadata") or "", "commitTimestamp": int(record["commit_timestamp"]),
            "expireTimestamp": expire})
    consumer = record.get("protocol_type") == "consumer"
    members = []
    for m in record.get("members") or []:
        sub, assignment = m.get("subscription") or {}, m.get("assignment") or {}
        members.append({
            "memberId": m["member_id"], "groupInstanceId": m.get("group_instance_id"),
            "clientId": m.get("client_id", ""), "clientHost": m.get("client_host", ""),
            "rebalanceTimeout": int(m.get("rebalance_timeout", -1)), "sessionTimeout": int(m["session_timeout"]),
            "subscription": _embedded_bytes(encode_subscription, sub, consumer),
            "assignment": _embedded_bytes(encode_assignment, assignment, consumer)})
    return key, encode(s.GROUP_METADATA_VALUE, record.get("value_version", GROUP_VALUE_VERSION), {
        "protocolType": record.get("protocol_type") or "", "generation": int(record["generation"]),
        "protocol": record.get("protocol"), "leader": record.get("leader"),
        "currentStateTimestamp": int(record.get("current_state_timestamp", -1)), "members": members})


_KEY_HEAD = struct.Struct(">hh")
_H, _I = struct.Struct(">h"), struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")
_Q = struct.Struct(">q")


def _fast_offset_commit(record: dict) -> tuple[bytes, bytes]:
    """OffsetCommitKey v1 + OffsetCommitValue v3 without the generic walker: the hot path of every commit.
    Byte-identical to ``encode`` over the schemas (tested)."""
    group, topic = record["group_id"].encode("utf-8"), record["topic"].encode("utf-8")
    metadata = (record.get("metadata") or "").encode("utf-8")
    if max(len(group), len(topic), len(metadata)) > 0x7FFF:
        raise ValueError("a string of an offset commit is longer than Kafka's 32767 bytes")
    key = b"".join((_KEY_HEAD.pack(OFFSET_KEY_VERSION, len(group)), group, _H.pack(len(topic)), topic,
                    _I.pack(int(record["partition"]))))
    value = b"".join((_VALUE_HEAD.pack(OFFSET_VALUE_VERSION, int(record["offset"]), int(record.get("leader_epoch", -1))),
                      _H.pack(len(metadata)), metadata, _Q.pack(int(record["commit_timestamp"]))))
    return key, value


def decode_record(key: bytes, value: bytes | None) -> dict:
    """The record dict for a key/value pair read from ``__consumer_offsets`` (value None = tombstone)."""
    if key is None or len(key) < 2:
        raise CodecError("record key shorter than its version")
    key_version = Reader(key).int("int16")
    if key_version not in s.RECORD_TYPES:
        return {"type": "unknown", "key_version": key_version,
                "record_type": s.KNOWN_OTHER_KEYS.get(key_version, "unknown"), "tombstone": value is None}
    key_schema, value_schema = s.RECORD_TYPES[key_version]
    _, k = decode(key_schema, key)
    if key_schema is s.OFFSET_COMMIT_KEY:
        record = {"type": "offset_commit", "group_id": k["group"], "topic": k["topic"], "partition": k["partition"],
                  "key_version": key_version}
        if value is None:
            return {**record, "tombstone": True}
        version, v = decode(value_schema, value)
        return {**record, "offset": v["offset"], "leader_epoch": v["leaderEpoch"], "metadata": v["metadata"],
                "commit_timestamp": v["commitTimestamp"], "expire_timestamp": v["expireTimestamp"],
                "tombstone": False, "value_version": version}
    if value is None:
        return {"type": "group_metadata", "group_id": k["group"], "tombstone": True}
    version, v = decode(value_schema, value)
    consumer = v["protocolType"] == "consumer"
    members = []
    for m in v["members"]:
        # v0 has no rebalance timeout: Kafka's loader takes the session timeout (which bounded a 0.9 join round).
        rebalance_timeout = m["sessionTimeout"] if version == 0 else m["rebalanceTimeout"]
        members.append({
            "member_id": m["memberId"], "group_instance_id": m["groupInstanceId"], "client_id": m["clientId"],
            "client_host": m["clientHost"], "rebalance_timeout": rebalance_timeout,
            "session_timeout": m["sessionTimeout"],
            "subscription": _embedded(decode_subscription, m["subscription"], consumer),
            "assignment": _embedded(decode_assignment, m["assignment"], consumer)})
    return {"type": "group_metadata", "group_id": k["group"], "tombstone": False,
            "protocol_type": v["protocolType"], "generation": v["generation"], "protocol": v["protocol"],
            "leader": v["leader"], "current_state_timestamp": v["currentStateTimestamp"], "members": members,
            "value_version": version}


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
    if "raw" in embedded or not consumer:   # the bytes as read win over their decoded fields
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
    return encode(s.CONSUMER_PROTOCOL_SUBSCRIPTION, version, {
        "topics": list(sub.get("topics") or []), "userData": _b64decode_nullable(sub.get("user_data")),
        "ownedPartitions": _by_topic(sub.get("owned_partitions") or []),
        "generationId": int(sub.get("generation", -1) if sub.get("generation") is not None else -1),
        "rackId": sub.get("rack")})


def decode_subscription(data: bytes) -> dict:
    version, v = decode(s.CONSUMER_PROTOCOL_SUBSCRIPTION, data)
    return {"topics": v["topics"], "user_data": _b64(v["userData"]),
            "owned_partitions": [[tp["topic"], p] for tp in v["ownedPartitions"] or [] for p in tp["partitions"]],
            "generation": v["generationId"], "rack": v["rackId"], "version": version}


def encode_assignment(assignment: dict, version: int | None = None) -> bytes:
    """At ``version``, else the version the assignment was decoded from, else the newest."""
    version = assignment.get("version", CONSUMER_PROTOCOL_VERSION) if version is None else version
    return encode(s.CONSUMER_PROTOCOL_ASSIGNMENT, version, {
        "assignedPartitions": _by_topic(assignment.get("partitions") or []),
        "userData": _b64decode_nullable(assignment.get("user_data"))})


def decode_assignment(data: bytes) -> dict:
    version, v = decode(s.CONSUMER_PROTOCOL_ASSIGNMENT, data)
    return {"partitions": [[tp["topic"], p] for tp in v["assignedPartitions"] or [] for p in tp["partitions"]],
            "user_data": _b64(v["userData"]), "version": version}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
