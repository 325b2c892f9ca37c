"""The event feed's schema, as data, and the one validator every entry point uses.

An event is one JSON object per Kafka record, keyed by group id. ``parse_event`` returns the event normalised
(defaults filled, types checked) or the reason it is bad — never raises — so the job can dead-letter bad input.
Only what cannot be read as a request is bad input: a request Kafka would answer with an error (an empty group id,
no protocols) is a good event, and the coordinator gives Kafka's answer.
"""
from __future__ import annotations

import base64
import binascii
import json
import sys
import uuid
from typing import Any

MAX_EVENT_BYTES = 1 << 20

# Field specs: name -> (kind, required, default). Kinds: str, int (Kafka's int64), int32 (Kafka's int32 fields), time
# (epoch ms, >= 0), protocols, partitions, offsets, assignments; a trailing "?" accepts null. Defaults are used when
# the field is absent.
_COMMON = {"group_id": ("str", True, None), "ts": ("time?", False, None)}
_MEMBER = {"member_id": ("str", False, ""), "group_instance_id": ("str?", False, None)}

EVENT_SCHEMA: dict[str, dict[str, tuple[str, bool, Any]]] = {
    "join": {**_MEMBER, "client_id": ("str", False, "consumer"), "client_host": ("str", False, "/127.0.0.1"),
             "session_timeout_ms": ("int32", False, 10_000), "rebalance_timeout_ms": ("int32?", False, None),
             "protocol_type": ("str", False, "consumer"), "protocols": ("protocols", True, None),
             "reason": ("str?", False, None),
             # Set when the join is reported from the broker's answer (observe mode): the generation it opened
             # and its leader.
             "generation": ("int32?", False, None), "leader": ("str?", False, None)},
    "sync": {**_MEMBER, "generation": ("int32", True, None), "protocol_type": ("str?", False, None),
             "protocol_name": ("str?", False, None), "assignments": ("assignments", False, None),
             "assigned": ("partitions?", False, None)},
    "heartbeat": {**_MEMBER, "generation": ("int32", True, None)},
    "leave": {**_MEMBER, "reason": ("str?", False, None)},
    "commit": {**_MEMBER, "generation": ("int32", False, -1), "offsets": ("offsets", True, None),
               "retention_ms": ("int", False, -1)},
    "topic_metadata": {"topic": ("str", True, None), "partitions": ("int32", True, None),
                       # Optional, read by the consumer protocol model (streaming/coordinator/consumer/).
                       "topic_id": ("uuid?", False, None), "partition_racks": ("racks?", False, None)},
    "delete_group": {},
    # KIP-848 (group.protocol=consumer): one ConsumerGroupHeartbeat request, fields as Kafka's request has them.
    # Null means "not sent" (Kafka's nullable fields); -1 for rebalance_timeout_ms likewise.
    "consumer_heartbeat": {"member_id": ("str", False, ""), "member_epoch": ("int32", True, None),
                           "instance_id": ("str?", False, None), "rack_id": ("str?", False, None),
                           "rebalance_timeout_ms": ("int32", False, -1),
                           "subscribed_topic_names": ("strings?", False, None),
                           "subscribed_topic_regex": ("str?", False, None), "server_assignor": ("str?", False, None),
                           "topic_partitions": ("owned?", False, None),
                           "client_id": ("str", False, "consumer"), "client_host": ("str", False, "/127.0.0.1")},
}
EVENT_TYPES = tuple(EVENT_SCHEMA)


class InvalidEvent(ValueError):
    pass


def parse_event(raw: bytes | str | dict | None, max_bytes: int = MAX_EVENT_BYTES) -> tuple[dict | None, str | None]:
    """(event, None) for a good event, (None, reason) for a bad one."""
    try:
        return validate_event(_decode(raw, max_bytes)), None
    except InvalidEvent as exc:
        return None, str(exc)


def validate_event(obj: Any) -> dict:
    if not isinstance(obj, dict):
        raise InvalidEvent(f"event must be a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind not in EVENT_SCHEMA:
        raise InvalidEvent(f"unknown event type {kind!r}; expected one of {', '.join(EVENT_TYPES)}")
    spec = dict(_COMMON)
    if kind == "topic_metadata":
        spec["group_id"] = ("str?", False, None)  # absent: the topic's size applies to every group
    spec.update(EVENT_SCHEMA[kind])
    event: dict[str, Any] = {"type": kind}
    for name, (field_kind, required, default) in spec.items():
        if name not in obj or (obj[name] is None and not field_kind.endswith("?")):
            if required:
                raise InvalidEvent(f"{kind}: missing field {name!r}")
            event[name] = default
            continue
        event[name] = _check(kind, name, field_kind, obj[name])
    if kind == "topic_metadata" and event["partitions"] < 0:
        raise InvalidEvent("topic_metadata: partitions must be >= 0")
    if kind == "join" and event["rebalance_timeout_ms"] is None:
        event["rebalance_timeout_ms"] = event["session_timeout_ms"]  # JoinGroup v0 semantics
    return event


def _decode(raw: bytes | str | dict | None, max_bytes: int) -> Any:
    if isinstance(raw, dict):
        return raw
    if raw is None:
        raise InvalidEvent("empty record value")
    if isinstance(raw, (bytes, bytearray, memoryview)):
        if len(raw) > max_bytes:
            raise InvalidEvent(f"event of {len(raw)} bytes exceeds the {max_bytes}-byte limit")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEvent(f"not UTF-8: byte 0x{exc.object[exc.start]:02x} at position {exc.start}") from None
    elif len(raw) > max_bytes:
        raise InvalidEvent(f"event of {len(raw)} characters exceeds the {max_bytes}-byte limit")
    try:
        return json.loads(raw, object_pairs_hook=_object, parse_constant=_no_constant)
    except InvalidEvent:
        raise
    except RecursionError:
        raise InvalidEvent("not valid JSON: nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise InvalidEvent(f"not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits") from None
        raise InvalidEvent(f"not valid JSON: {exc}") from None


def _object(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object whose keys are unique: with a repeated key, which value counts would be a guess."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise InvalidEvent(f"duplicate key {repeated!r}")
    return obj


def _no_constant(name: str) -> Any:
    raise InvalidEvent(f"{name} is not a JSON number")


def _check(kind: str, name: str, field_kind: str, value: Any) -> Any:
    where = f"{kind}.{name}"
    base = field_kind.rstrip("?")
    if value is None:
        return None
    if base == "str":
        if not isinstance(value, str):
            raise InvalidEvent(f"{where} must be a string")
        return value
    if base == "int":
        return _int(where, value)
    if base == "int32":
        return _int(where, value, *_INT32)
    if base == "time":
        return _int(where, value, 0, _INT64[1])
    if base == "partitions":
        return _partitions(where, value)
    if base == "protocols":
        if not isinstance(value, list):
            raise InvalidEvent(f"{where} must be a list of protocols")
        return [_protocol(f"{where}[{i}]", p) for i, p in enumerate(value)]
    if base == "assignments":
        if not isinstance(value, dict):
            raise InvalidEvent(f"{where} must be an object of member id -> partitions")
        return {str(member): _partitions(f"{where}.{member}", parts) for member, parts in value.items()}
    if base == "strings":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidEvent(f"{where} must be a list of strings")
        return list(value)
    if base == "uuid":
        return _uuid(where, value)
    if base == "owned":
        return _owned(where, value)
    if base == "racks":
        if not isinstance(value, dict):
            raise InvalidEvent(f"{where} must be an object of partition -> list of racks")
        out = {}
        for key, racks in value.items():
            if not str(key).isdigit() or not isinstance(racks, list) or not all(isinstance(r, str) for r in racks):
                raise InvalidEvent(f"{where} must be an object of partition -> list of racks, got {key!r}")
            out[int(key)] = list(racks)
        return out
    if base == "offsets":
        if not isinstance(value, list):
            raise InvalidEvent(f"{where} must be a list")
        return [_offset(f"{where}[{i}]", o) for i, o in enumerate(value)]
    raise AssertionError(field_kind)


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _int(where: str, value: Any, low: int = _INT64[0], high: int = _INT64[1]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(f"{where} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidEvent(f"{where} = {_short(value)} is out of range [{low}, {high}]")
    return value


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:10]}...({len(text)} digits)"


def _uuid(where: str, value: Any) -> str:
    """A Kafka ``Uuid`` in its string form (URL-safe base64 of the 16 bytes, 22 characters, what ``Uuid.toString()``
    prints); a hyphenated UUID is accepted and given in that form, so the id is the one the records carry."""
    if isinstance(value, str):
        if len(value) == 22:
            try:
                data = base64.urlsafe_b64decode(value + "==")
            except (binascii.Error, ValueError):
                data = b""
            if len(data) == 16 and base64.urlsafe_b64encode(data).decode("ascii").rstrip("=") == value:
                return value
        elif len(value) == 36:
            try:
                data = uuid.UUID(value).bytes
            except ValueError:
                data = b""
            if data:
                return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
    raise InvalidEvent(f"{where} must be a Kafka topic id (22 characters of URL-safe base64, or a hyphenated UUID), "
                       f"got {value!r}")


def _partitions(where: str, value: Any) -> list[list]:
    if not isinstance(value, list):
        raise InvalidEvent(f"{where} must be a list of [topic, partition] pairs")
    out = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or isinstance(item[1], bool) or not isinstance(item[1], int) or not 0 <= item[1] <= _INT32[1]):
            raise InvalidEvent(f"{where} must be a list of [topic, partition] pairs, got {item!r}")
        out.append([item[0], item[1]])
    return out


def _owned(where: str, value: Any) -> list[dict]:
    """Owned partitions: [[topic, partition], ...] or Kafka's [{"topic_id" or "topic", "partitions": [...]}, ...]."""
    if not isinstance(value, list):
        raise InvalidEvent(f"{where} must be a list")
    out = []
    for item in value:
        if isinstance(item, dict):
            topic_id, topic, parts = item.get("topic_id"), item.get("topic"), item.get("partitions")
            if (topic_id is None) == (topic is None) or not isinstance(topic_id or topic, str):
                raise InvalidEvent(f"{where} entries need a string topic_id or topic, got {item!r}")
            if not isinstance(parts, list):
                raise InvalidEvent(f"{where} entries need a list of partitions, got {item!r}")
            out.append({"topic_id": topic_id, "topic": topic,
                        "partitions": [_int(f"{where}.partitions", p, 0, _INT32[1]) for p in parts]})
        else:
            (topic, partition), = _partitions(where, [item])
            out.append({"topic_id": None, "topic": topic, "partitions": [partition]})
    return out


def _protocol(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise InvalidEvent(f"{where} must be an object")
    name = value.get("name")
    if not isinstance(name, str):
        raise InvalidEvent(f"{where}.name must be a string")
    topics = value.get("topics", [])
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise InvalidEvent(f"{where}.topics must be a list of strings")
    owned = value.get("owned_partitions")
    user_data = value.get("user_data")
    if user_data is not None:
        if not isinstance(user_data, str):
            raise InvalidEvent(f"{where}.user_data must be base64 text")
        try:
            base64.b64decode(user_data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidEvent(f"{where}.user_data is not valid base64") from None
    rack = value.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise InvalidEvent(f"{where}.rack must be a string")
    return {"name": name, "topics": list(dict.fromkeys(topics)),
            "owned_partitions": None if owned is None else _partitions(f"{where}.owned_partitions", owned),
            "generation": _int(f"{where}.generation", value.get("generation", -1), *_INT32),
            "user_data": user_data, "rack": rack}


def _offset(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise InvalidEvent(f"{where} must be an object")
    topic = value.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidEvent(f"{where}.topic must be a non-empty string")
    metadata = value.get("metadata", "")
    if metadata is None:
        metadata = ""
    if not isinstance(metadata, str):
        raise InvalidEvent(f"{where}.metadata must be a string")
    # Kafka's clients refuse negative offsets (OffsetAndMetadata) and leader epochs below -1 (none).
    return {"topic": topic, "partition": _int(f"{where}.partition", value.get("partition"), 0, _INT32[1]),
            "offset": _int(f"{where}.offset", value.get("offset"), 0),
            "leader_epoch": _int(f"{where}.leader_epoch", value.get("leader_epoch", -1), -1, _INT32[1]),
            "metadata": metadata}
