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
from typing import Any

MAX_EVENT_BYTES = 1 << 20

# Field specs: name -> (kind, required, default). Kinds: str, str?, int, bool, protocols, partitions, offsets,
# assignments. "str?" accepts null. Defaults are used when the field is absent.
_COMMON = {"group_id": ("str", True, None), "ts": ("int?", False, None)}
_MEMBER = {"member_id": ("str", False, ""), "group_instance_id": ("str?", False, None)}

EVENT_SCHEMA: dict[str, dict[str, tuple[str, bool, Any]]] = {
    "join": {**_MEMBER, "client_id": ("str", False, "consumer"), "client_host": ("str", False, "/127.0.0.1"),
             "session_timeout_ms": ("int", False, 10_000), "rebalance_timeout_ms": ("int?", False, None),
             "protocol_type": ("str", False, "consumer"), "protocols": ("protocols", True, None),
             "reason": ("str?", False, None),
             # Set when the join is reported from the broker's answer (observe mode): the generation it opened
             # and its leader.
             "generation": ("int?", False, None), "leader": ("str?", False, None)},
    "sync": {**_MEMBER, "generation": ("int", True, None), "protocol_type": ("str?", False, None),
             "protocol_name": ("str?", False, None), "assignments": ("assignments", False, None),
             "assigned": ("partitions?", False, None)},
    "heartbeat": {**_MEMBER, "generation": ("int", True, None)},
    "leave": {**_MEMBER, "reason": ("str?", False, None)},
    "commit": {**_MEMBER, "generation": ("int", False, -1), "offsets": ("offsets", True, None),
               "retention_ms": ("int", False, -1)},
    "topic_metadata": {"topic": ("str", True, None), "partitions": ("int", True, None)},
    "delete_group": {},
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
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if len(raw) > max_bytes:
        raise InvalidEvent(f"event of {len(raw)} bytes exceeds the {max_bytes}-byte limit")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidEvent(f"not valid JSON: {exc}") from None


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
    if base == "offsets":
        if not isinstance(value, list):
            raise InvalidEvent(f"{where} must be a list")
        return [_offset(f"{where}[{i}]", o) for i, o in enumerate(value)]
    raise AssertionError(field_kind)


def _int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(f"{where} must be an integer")
    if not -(2**63) <= value < 2**63:
        raise InvalidEvent(f"{where} is out of range")
    return value


def _partitions(where: str, value: Any) -> list[list]:
    if not isinstance(value, list):
        raise InvalidEvent(f"{where} must be a list of [topic, partition] pairs")
    out = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or isinstance(item[1], bool) or not isinstance(item[1], int) or item[1] < 0):
            raise InvalidEvent(f"{where} must be a list of [topic, partition] pairs, got {item!r}")
        out.append([item[0], item[1]])
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
            "generation": _int(f"{where}.generation", value.get("generation", -1)),
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
    partition = _int(f"{where}.partition", value.get("partition"))
    if partition < 0:
        raise InvalidEvent(f"{where}.partition must be >= 0")
    return {"topic": topic, "partition": partition, "offset": _int(f"{where}.offset", value.get("offset")),
            "leader_epoch": _int(f"{where}.leader_epoch", value.get("leader_epoch", -1)), "metadata": metadata}
