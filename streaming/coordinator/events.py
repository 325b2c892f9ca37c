"""The event feed's schema, as typed msgspec Structs, and the one validator every entry point uses.

An event is one JSON object per Kafka record, keyed by group id. ``parse_event`` returns the event normalised
(defaults filled, types checked) or the reason it is bad — never raises — so the job can dead-letter bad input.
Only what cannot be read as a request is bad input: a request Kafka would answer with an error (an empty group id,
no protocols) is a good event, and the coordinator gives Kafka's answer.

msgspec decodes and checks a record in one pass of C (a tagged union on ``type``; ranges as ``Meta`` bounds), ~5x
faster than ``json`` plus hand-written checks. Two things it does not do on its own, done here: refusing duplicate
keys (msgspec keeps the last one), and turning its errors into reasons that name the event type, the field and the
offending value. A null in a field that is not nullable counts as the field left out, as before.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import uuid
from typing import Annotated, Any, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

MAX_EVENT_BYTES = 1 << 20
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

Int = Annotated[int, Meta(ge=_INT64[0], le=_INT64[1])]  # Kafka's int64 fields
Int32 = Annotated[int, Meta(ge=_INT32[0], le=_INT32[1])]  # Kafka's int32 fields
Time = Annotated[int, Meta(ge=0, le=_INT64[1])]  # epoch ms
PartitionId = Annotated[int, Meta(ge=0, le=_INT32[1])]
ApiVersion = Annotated[int, Meta(ge=0, le=2**15 - 1)]  # a request's version (int16)
Partitions = list[tuple[str, PartitionId]]  # [[topic, partition], ...]
Offset = Annotated[int, Meta(ge=-1001, le=_INT64[1])]  # librdkafka reports logical offsets (-1001: none)


class ProtocolIn(Struct):
    name: str
    topics: list[str] | UnsetType = UNSET
    owned_partitions: Union[Partitions, None] | UnsetType = UNSET
    generation: Int32 | UnsetType = UNSET
    user_data: Union[str, None] | UnsetType = UNSET  # base64
    rack: Union[str, None] | UnsetType = UNSET
    # the embedded ConsumerProtocolSubscription's version (the bytes a consumer group's classic member keeps)
    version: Union[Annotated[int, Meta(ge=0, le=2**15 - 1)], None] | UnsetType = UNSET


class OffsetIn(Struct):
    topic: Annotated[str, Meta(min_length=1)]
    partition: PartitionId
    offset: Annotated[int, Meta(ge=0, le=_INT64[1])]  # Kafka's clients refuse negative offsets
    leader_epoch: Annotated[int, Meta(ge=-1, le=_INT32[1])] | UnsetType = UNSET
    metadata: Union[str, None] | UnsetType = UNSET


# Every field but ``type`` may be null; a null where the schema has no null means "left out" (see _FIELDS). Fields
# left out are UNSET, so that re-encoding a Struct writes exactly the keys the record had (_refuse_duplicate_keys).
class _Event(Struct, tag_field="type"):
    group_id: Union[str, None] | UnsetType = UNSET
    ts: Union[Time, None] | UnsetType = UNSET


class _Member(_Event):
    member_id: Union[str, None] | UnsetType = UNSET
    group_instance_id: Union[str, None] | UnsetType = UNSET


class Join(_Member, tag="join"):
    client_id: Union[str, None] | UnsetType = UNSET
    client_host: Union[str, None] | UnsetType = UNSET
    session_timeout_ms: Union[Int32, None] | UnsetType = UNSET
    rebalance_timeout_ms: Union[Int32, None] | UnsetType = UNSET
    protocol_type: Union[str, None] | UnsetType = UNSET
    protocols: Union[list[ProtocolIn], None] | UnsetType = UNSET
    reason: Union[str, None] | UnsetType = UNSET
    # Set when the join is reported from the broker's answer (observe mode): the generation it opened and its leader.
    generation: Union[Int32, None] | UnsetType = UNSET
    leader: Union[str, None] | UnsetType = UNSET


class Sync(_Member, tag="sync"):
    generation: Union[Int32, None] | UnsetType = UNSET
    protocol_type: Union[str, None] | UnsetType = UNSET
    protocol_name: Union[str, None] | UnsetType = UNSET
    assignments: Union[dict[str, Partitions], None] | UnsetType = UNSET
    assigned: Union[Partitions, None] | UnsetType = UNSET
    ts_inferred: Union[str, None] | UnsetType = UNSET  # the cluster feed's: where ``ts`` came from, if not the record


class Heartbeat(_Member, tag="heartbeat"):
    generation: Union[Int32, None] | UnsetType = UNSET


class Leave(_Member, tag="leave"):
    reason: Union[str, None] | UnsetType = UNSET


class Commit(_Member, tag="commit"):
    """OffsetCommit. ``generation`` is Kafka's generationIdOrMemberEpoch: a classic member's generation, a
    consumer-protocol member's epoch, -1 for the admin client or a consumer without group management.
    ``api_version`` (optional): the request's OffsetCommit version, where Kafka's answer depends on it (null: not
    stated; see the coordinators' commit handling)."""

    generation: Union[Int32, None] | UnsetType = UNSET
    offsets: Union[list[OffsetIn], None] | UnsetType = UNSET
    retention_ms: Union[Int, None] | UnsetType = UNSET
    api_version: Union[ApiVersion, None] | UnsetType = UNSET


class TopicMetadata(_Event, tag="topic_metadata"):
    topic: Union[str, None] | UnsetType = UNSET
    partitions: Union[Int32, None] | UnsetType = UNSET
    # Optional, read by the consumer-protocol model (streaming/coordinator/consumer/).
    topic_id: Union[str, None] | UnsetType = UNSET
    partition_racks: Union[dict[str, list[str]], None] | UnsetType = UNSET


class OwnedTopic(Struct):
    """Kafka's ConsumerGroupHeartbeatRequest.TopicPartitions: by topic id or by name."""

    partitions: list[PartitionId]
    topic_id: Union[str, None] | UnsetType = UNSET
    topic: Union[str, None] | UnsetType = UNSET


class ConsumerHeartbeat(_Event, tag="consumer_heartbeat"):
    """KIP-848 (group.protocol=consumer): one ConsumerGroupHeartbeat request, fields as Kafka's request has them.
    Null means "not sent" (Kafka's nullable fields); -1 for rebalance_timeout_ms likewise."""

    member_id: Union[str, None] | UnsetType = UNSET
    member_epoch: Union[Int32, None] | UnsetType = UNSET
    instance_id: Union[str, None] | UnsetType = UNSET
    rack_id: Union[str, None] | UnsetType = UNSET
    rebalance_timeout_ms: Union[Int32, None] | UnsetType = UNSET
    subscribed_topic_names: Union[list[str], None] | UnsetType = UNSET
    subscribed_topic_regex: Union[str, None] | UnsetType = UNSET
    server_assignor: Union[str, None] | UnsetType = UNSET
    # [[topic, partition], ...] or Kafka's [{"topic_id" or "topic", "partitions": [...]}, ...]
    topic_partitions: Union[list[Union[tuple[str, PartitionId], OwnedTopic]], None] | UnsetType = UNSET
    client_id: Union[str, None] | UnsetType = UNSET
    client_host: Union[str, None] | UnsetType = UNSET


class DeleteGroup(_Event, tag="delete_group"):
    pass


class SessionExpired(_Event, tag="session_expired"):
    """Not a request: an observer's word that the coordinator's session timer of a KIP-848 member fired at ``ts``
    (the cluster feed sends it for a static member removed while away at epoch -2: it sends nothing more, so its
    removal is the broker's timer). The consumer model fences the member as Kafka's timer does."""

    member_id: Union[str, None] | UnsetType = UNSET


class RegexResolved(_Event, tag="regex_resolved"):
    """Not a request: an observer's word that the broker's resolution of the consumer group's regular expressions,
    asked for by an earlier request, was written at ``ts`` (Kafka resolves them asynchronously, as a write of its
    own). A consumer model that waits for these (``regex.resolution.events``) resolves then what was asked.
    ``started_ms``: when the broker's resolution started (its records' ``timestamp``; the next refresh waits 10 s
    from it)."""

    started_ms: Union[Time, None] | UnsetType = UNSET


class LogEnd(_Event, tag="log_end"):
    """A sample of where a partition the group consumes ends (ListOffsets latest, read at ``ts``): what lag is
    measured against (streaming/coordinator/lag.py). Published per group by the log-end sampler
    (streaming/feeds/log_end_sampler.py), so it travels with the group's other events."""

    topic: Union[str, None] | UnsetType = UNSET
    partition: Union[PartitionId, None] | UnsetType = UNSET
    offset: Union[Annotated[int, Meta(ge=0, le=_INT64[1])], None] | UnsetType = UNSET


class ClientReport(_Event, tag="client_report"):
    """What a consumer's client library told its application -- not a request to the coordinator, so no model acts
    on it: it is passed on to the outputs beside what the tracker made of the requests
    (streaming/feeds/instrument_confluent.py publishes librdkafka's). ``report``: ``assigned`` / ``revoked`` /
    ``lost`` (a rebalance callback: ``partitions`` [[topic, partition], ...]), ``committed`` (the commit callback:
    ``offsets`` [[topic, partition, offset], ...] the broker accepted) / ``commit_failed`` (``error``, and the
    offsets it refused), ``stats`` (the client's group state: ``state``, ``join_state``, ``rebalance_cnt``,
    ``rebalance_reason``, ``assignment_size``)."""

    report: Union[str, None] | UnsetType = UNSET
    member_id: Union[str, None] | UnsetType = UNSET
    instance_id: Union[str, None] | UnsetType = UNSET
    client_id: Union[str, None] | UnsetType = UNSET
    partitions: Union[Partitions, None] | UnsetType = UNSET
    offsets: Union[list[tuple[str, PartitionId, Offset]], None] | UnsetType = UNSET  # [[topic, p, offset]]
    error: Union[str, None] | UnsetType = UNSET
    state: Union[str, None] | UnsetType = UNSET
    join_state: Union[str, None] | UnsetType = UNSET
    rebalance_cnt: Union[Annotated[int, Meta(ge=0, le=_INT64[1])], None] | UnsetType = UNSET
    rebalance_reason: Union[str, None] | UnsetType = UNSET
    assignment_size: Union[Annotated[int, Meta(ge=0, le=_INT32[1])], None] | UnsetType = UNSET


CLIENT_REPORTS = ("assigned", "revoked", "lost", "committed", "commit_failed", "stats")
_TYPES = (
    Join,
    Sync,
    Heartbeat,
    Leave,
    Commit,
    TopicMetadata,
    DeleteGroup,
    SessionExpired,
    RegexResolved,
    ConsumerHeartbeat,
    LogEnd,
    ClientReport,
)
EVENT_TYPES = tuple(t.__struct_config__.tag for t in _TYPES)
_Any = Union[_TYPES]
_DECODER = msgspec.json.Decoder(_Any)


class _Envelope(Struct):
    """``convert`` to a bare Union re-reads the Union's types on every call (~20x slower); a Struct caches them."""

    e: _Any


def _convert(obj: dict) -> Struct:
    try:
        return msgspec.convert({"e": obj}, _Envelope).e
    except msgspec.ValidationError as exc:
        raise InvalidEvent(_reason(str(exc).replace("`$.e", "`$", 1), obj)) from None


_GENERIC = msgspec.json.Decoder()
_ENCODE = msgspec.json.encode

# Per type, in output order: (field, required, nullable, default). Required: null or absent is "missing field".
_COMMON = [("group_id", True, False, None), ("ts", False, True, None)]
_MEMBER = [("member_id", False, False, ""), ("group_instance_id", False, True, None)]
_FIELDS: dict[str, list[tuple[str, bool, bool, Any]]] = {
    "join": _COMMON
    + _MEMBER
    + [
        ("client_id", False, False, "consumer"),
        ("client_host", False, False, "/127.0.0.1"),
        ("session_timeout_ms", False, False, 10_000),
        ("rebalance_timeout_ms", False, True, None),
        ("protocol_type", False, False, "consumer"),
        ("protocols", True, False, None),
        ("reason", False, True, None),
        ("generation", False, True, None),
        ("leader", False, True, None),
    ],
    "sync": _COMMON
    + _MEMBER
    + [
        ("generation", True, False, None),
        ("protocol_type", False, True, None),
        ("protocol_name", False, True, None),
        ("assignments", False, True, None),
        ("assigned", False, True, None),
        ("ts_inferred", False, True, None),
    ],
    "heartbeat": _COMMON + _MEMBER + [("generation", True, False, None)],
    "leave": _COMMON + _MEMBER + [("reason", False, True, None)],
    "commit": _COMMON
    + _MEMBER
    + [
        ("generation", False, False, -1),
        ("offsets", True, False, None),
        ("retention_ms", False, False, -1),
        ("api_version", False, True, None),
    ],
    # Without a group id, a topic's size applies to every group.
    "topic_metadata": [
        ("group_id", False, True, None),
        ("ts", False, True, None),
        ("topic", True, False, None),
        ("partitions", True, False, None),
        ("topic_id", False, True, None),
        ("partition_racks", False, True, None),
    ],
    "delete_group": list(_COMMON),
    "session_expired": _COMMON + [("member_id", True, False, None)],
    "regex_resolved": _COMMON + [("started_ms", False, True, None)],
    "log_end": _COMMON
    + [("topic", True, False, None), ("partition", True, False, None), ("offset", True, False, None)],
    "client_report": _COMMON
    + [
        ("report", True, False, None),
        ("member_id", False, False, ""),
        ("instance_id", False, True, None),
        ("client_id", False, True, None),
        ("partitions", False, True, None),
        ("offsets", False, True, None),
        ("error", False, True, None),
        ("state", False, True, None),
        ("join_state", False, True, None),
        ("rebalance_cnt", False, True, None),
        ("rebalance_reason", False, True, None),
        ("assignment_size", False, True, None),
    ],
    "consumer_heartbeat": _COMMON
    + [
        ("member_id", False, False, ""),
        ("member_epoch", True, False, None),
        ("instance_id", False, True, None),
        ("rack_id", False, True, None),
        ("rebalance_timeout_ms", False, False, -1),
        ("subscribed_topic_names", False, True, None),
        ("subscribed_topic_regex", False, True, None),
        ("server_assignor", False, True, None),
        ("topic_partitions", False, True, None),
        ("client_id", False, False, "consumer"),
        ("client_host", False, False, "/127.0.0.1"),
    ],
}


class InvalidEvent(ValueError):
    pass


def parse_event(raw: bytes | str | dict | None, max_bytes: int = MAX_EVENT_BYTES) -> tuple[dict | None, str | None]:
    """(event, None) for a good event, (None, reason) for a bad one."""
    try:
        if isinstance(raw, dict):
            return validate_event(raw), None
        return _normalise(_decode(raw, max_bytes)), None
    except InvalidEvent as exc:
        return None, str(exc)


def validate_event(obj: Any) -> dict:
    """Check an already decoded event (a dict from Python code rather than a record's bytes)."""
    if not isinstance(obj, dict):
        raise InvalidEvent(f"event must be a JSON object, got {type(obj).__name__}")
    return _normalise(_convert(obj))


def _decode(raw: bytes | str | None, max_bytes: int) -> Struct:
    if raw is None:
        raise InvalidEvent("empty record value")
    if len(raw) > max_bytes:
        unit = "characters" if isinstance(raw, str) else "bytes"
        raise InvalidEvent(f"event of {len(raw)} {unit} exceeds the {max_bytes}-byte limit")
    if isinstance(raw, (bytearray, memoryview)):
        raw = bytes(raw)
    # Fast path, one typed pass. Its re-encoding holds exactly the keys it read (left-out fields are UNSET): as
    # many ':' as the record means no key was repeated and none was unknown (so skipped unread). Escaped colons
    # (\\u003a) would upset the count and take the careful path.
    try:
        event = _DECODER.decode(raw)
        colon, escaped = (":", "\\u003") if isinstance(raw, str) else (b":", b"\\u003")
        if raw.count(colon) == _ENCODE(event).count(b":") and escaped not in raw:
            return event
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass  # the careful path says why, in the same order as ever
    # Careful path: the generic tree first (every string read, so bad UTF-8 is found; every key kept, unknown ones
    # too), then duplicate keys, then the types.
    try:
        tree = _GENERIC.decode(raw)
    except RecursionError:
        raise InvalidEvent("not valid JSON: nested too deeply") from None
    except msgspec.ValidationError as exc:  # a number JSON allows but no one can read
        raise InvalidEvent(_number_reason(raw, str(exc))) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InvalidEvent(_not_json(raw, str(exc))) from None
    if not isinstance(tree, dict):
        raise InvalidEvent(f"event must be a JSON object, got {type(tree).__name__}")
    _refuse_duplicate_keys(raw, tree)
    return _convert(tree)


def _refuse_duplicate_keys(raw: bytes | str, tree: dict) -> None:
    """With a repeated key, which value counts would be a guess. A ':' outside strings separates a key from its
    value, and re-encoding writes a ':' exactly where the tree keeps one (after each distinct key, and inside
    strings as they were): fewer colons in the re-encoding means a key was dropped as a repeat. An escaped colon
    would upset the count, so such records are read once more by ``json``, which sees every pair."""
    colon, escaped = (":", "\\u003") if isinstance(raw, str) else (b":", b"\\u003")
    if raw.count(colon) == _ENCODE(tree).count(b":") and escaped not in raw:
        return
    json.loads(raw, object_pairs_hook=_unique_object)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise InvalidEvent(f"duplicate key {repeated!r}")
    return obj


def _normalise(s: Struct) -> dict:
    """The Struct as the coordinator's event dict: defaults filled, pairs as lists, protocols and offsets as dicts."""
    kind = s.__struct_config__.tag
    event: dict[str, Any] = {"type": kind}
    for name, required, _nullable, default in _FIELDS[kind]:
        value = getattr(s, name)
        if value is None or value is UNSET:
            if required:
                raise InvalidEvent(f"{kind}: missing field {name!r}")
            value = default
        event[name] = value
    if kind == "heartbeat":  # most of any feed: nothing nested
        return event
    if kind == "join":
        event["protocols"] = [_protocol(f"join.protocols[{i}]", p) for i, p in enumerate(event["protocols"])]
        if event["rebalance_timeout_ms"] is None:
            event["rebalance_timeout_ms"] = event["session_timeout_ms"]  # JoinGroup v0 semantics
    elif kind == "commit":
        event["offsets"] = [
            {
                "topic": o.topic,
                "partition": o.partition,
                "offset": o.offset,
                "leader_epoch": -1 if o.leader_epoch is UNSET else o.leader_epoch,
                "metadata": "" if o.metadata is None or o.metadata is UNSET else o.metadata,
            }
            for o in event["offsets"]
        ]
    elif kind == "sync":
        if event["assignments"] is not None:
            event["assignments"] = {m: [list(tp) for tp in parts] for m, parts in event["assignments"].items()}
        if event["assigned"] is not None:
            event["assigned"] = [list(tp) for tp in event["assigned"]]
    elif kind == "topic_metadata":
        if event["partitions"] < 0:
            raise InvalidEvent("topic_metadata: partitions must be >= 0")
        if event["topic_id"] is not None:
            event["topic_id"] = _uuid("topic_metadata.topic_id", event["topic_id"])
        if event["partition_racks"] is not None:
            event["partition_racks"] = _racks("topic_metadata.partition_racks", event["partition_racks"])
    elif kind == "log_end":
        if not event["topic"] or not event["group_id"]:
            raise InvalidEvent(f"log_end: {'topic' if not event['topic'] else 'group_id'} must be a non-empty string")
    elif kind == "client_report":
        if event["report"] not in CLIENT_REPORTS or not event["group_id"]:
            raise InvalidEvent(
                f"client_report: report must be one of {', '.join(CLIENT_REPORTS)}, not {event['report']!r}"
                if event["group_id"]
                else "client_report: group_id must be a non-empty string"
            )
        for name in ("partitions", "offsets"):
            if event[name] is not None:
                event[name] = [list(item) for item in event[name]]
    elif kind == "consumer_heartbeat":
        if event["subscribed_topic_names"] is not None:
            event["subscribed_topic_names"] = list(event["subscribed_topic_names"])
        if event["topic_partitions"] is not None:
            event["topic_partitions"] = [
                _owned("consumer_heartbeat.topic_partitions", item) for item in event["topic_partitions"]
            ]
    return event


def _uuid(where: str, value: str) -> str:
    """A Kafka ``Uuid`` in its string form (URL-safe base64 of the 16 bytes, 22 characters, what ``Uuid.toString()``
    prints); a hyphenated UUID is accepted and given in that form, so the id is the one the records carry."""
    if len(value) == 22:
        try:
            data = base64.urlsafe_b64decode(value + "==")
        except (binascii.Error, ValueError):
            data = b""
        if len(data) == 16 and base64.urlsafe_b64encode(data).decode("ascii").rstrip("=") == value:
            return value
    elif len(value) == 36:
        try:
            return base64.urlsafe_b64encode(uuid.UUID(value).bytes).decode("ascii").rstrip("=")
        except ValueError:
            pass
    raise InvalidEvent(
        f"{where} must be a Kafka topic id (22 characters of URL-safe base64, or a hyphenated UUID), got {value!r}"
    )


def _racks(where: str, value: dict[str, list[str]]) -> dict[int, list[str]]:
    if not all(key.isdigit() for key in value):
        bad = next(key for key in value if not key.isdigit())
        raise InvalidEvent(f"{where} must be an object of partition -> list of racks, got {bad!r}")
    return {int(key): list(racks) for key, racks in value.items()}


def _owned(where: str, item) -> dict:
    """One owned entry as the model reads it: {"topic_id", "topic", "partitions"}."""
    if isinstance(item, OwnedTopic):
        topic_id = None if item.topic_id is UNSET else item.topic_id
        topic = None if item.topic is UNSET else item.topic
        if (topic_id is None) == (topic is None):
            raise InvalidEvent(f"{where} entries need a string topic_id or topic, got {msgspec.to_builtins(item)!r}")
        return {"topic_id": topic_id, "topic": topic, "partitions": list(item.partitions)}
    topic, partition = item
    return {"topic_id": None, "topic": topic, "partitions": [partition]}


def _protocol(where: str, p: ProtocolIn) -> dict:
    user_data = None if p.user_data is UNSET else p.user_data
    if user_data is not None:
        try:
            base64.b64decode(user_data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidEvent(f"{where}.user_data is not valid base64") from None
    owned = None if p.owned_partitions is UNSET else p.owned_partitions
    return {
        "name": p.name,
        "topics": [] if p.topics is UNSET else list(dict.fromkeys(p.topics)),
        "owned_partitions": None if owned is None else [list(tp) for tp in owned],
        "generation": -1 if p.generation is UNSET else p.generation,
        "user_data": user_data,
        "rack": None if p.rack is UNSET else p.rack,
        "version": None if p.version is UNSET else p.version,
    }


# ---------------------------------------------------------------------------------------------- reasons
# What each kind of field must be, for the reason (by the field's name; names mean the same in every event type).
_INTEGERS = {
    "ts",
    "generation",
    "member_epoch",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "partitions",
    "retention_ms",
    "partition",
    "offset",
    "leader_epoch",
    "api_version",
    "rebalance_cnt",
    "assignment_size",
    "started_ms",
}
_RANGES = {
    "ts": (0, _INT64[1]),
    "started_ms": (0, _INT64[1]),
    "retention_ms": _INT64,
    "partition": (0, _INT32[1]),
    "offset": (0, _INT64[1]),
    "leader_epoch": (-1, _INT32[1]),
    "api_version": (0, 2**15 - 1),
    "rebalance_cnt": (0, _INT64[1]),
    "assignment_size": (0, _INT32[1]),
}
_LISTS = {
    "protocols": "a list of protocols",
    "offsets": "a list",
    "topics": "a list of strings",
    "subscribed_topic_names": "a list of strings",
    "topic_partitions": "a list",
    "owned_partitions": "a list of [topic, partition] pairs",
    "assigned": "a list of [topic, partition] pairs",
}
_PAIRS = {"owned_partitions", "assigned", "assignments"}
_JSON_NAMES = {
    "object": "dict",
    "array": "list",
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "null": "NoneType",
}
_ERROR = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>.*)`)?$", re.S)
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")


def _reason(message: str, tree: dict) -> str:
    """msgspec's error (what was expected, at which ``$.path``) as the tracker's reason: ``kind.path`` first, and
    the offending value where it helps."""
    m = _ERROR.match(message)
    what, path = m["what"], m["path"] or ""
    kind = tree.get("type")
    if path == ".type" or (not path and "`type`" in what):
        return f"unknown event type {kind!r}; expected one of {', '.join(EVENT_TYPES)}"
    where = f"{kind}{path}"
    missing = re.match(r"Object missing required field `(\w+)`", what)
    if missing:
        return f"{kind}: missing field {missing[1]!r}" if not path else f"{where}.{missing[1]}: missing"
    steps = [a or (int(b) if b else None) for a, b in _STEP.findall(path)]
    names = [s for s in steps if isinstance(s, str)]
    field = names[-1] if names else ""
    value, found = _lookup(tree, path)
    if (field in _PAIRS or (kind == "client_report" and field == "partitions")) and (
        field != "assignments" or len(steps) > 1
    ):
        # Inside a list of pairs: name the list and show the pair that is wrong, when it can be found.
        cut = path.find("[", path.find(f".{field}"))
        item = _lookup(tree, path[: path.find("]", cut) + 1])[0] if cut >= 0 and "[...]" not in path else None
        return f"{kind}{path[:cut] if cut >= 0 else path} must be a list of [topic, partition] pairs" + (
            f", got {item!r}" if item is not None else ""
        )
    got = re.search(r"got `([\w ]+)`", what)
    if "out of range" in what or re.search(r"`(int|str)`[^,]*[<>]=|of length", what):
        if field in _INTEGERS and found and isinstance(value, int) and not isinstance(value, bool):
            low, high = _RANGES.get(field, _INT32)
            return f"{where} = {_short(value)} is out of range [{low}, {high}]"
        if "of length" in what:
            return f"{where} must be a non-empty string"
        got_name = "float"  # a float too large for a double (1e999)
    else:
        got_name = _JSON_NAMES.get(got[1], got[1]) if got else type(value).__name__
    if field in _INTEGERS and not isinstance(steps[-1], int):
        return f"{where} must be an integer, got {got_name}"
    if field in _LISTS and not isinstance(steps[-1], int):
        return f"{where} must be {_LISTS[field]}"
    if field == "assignments":
        return f"{where} must be an object of member id -> partitions"
    if "`object`" in what:
        return f"{where} must be an object"
    if field == "topics":
        return f"{where.rsplit('[', 1)[0]} must be a list of strings"
    if "`str" in what:
        return f"{where} must be a string"
    return f"{where}: {what[0].lower()}{what[1:]}"


def _lookup(tree: Any, path: str) -> tuple[Any, bool]:
    node = tree
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
        try:
            node = node[name] if name else node[int(index)]
        except (KeyError, IndexError, TypeError):
            return None, False
    return node, True


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:10]}...({len(text)} digits)"


def _not_json(raw: bytes | str, message: str) -> str:
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8: byte 0x{exc.object[exc.start]:02x} at position {exc.start}"
    at = re.search(r"\(byte (\d+)\)", message)
    if at:
        rest = raw[int(at[1]) :]
        for name in ("NaN", "Infinity", "-Infinity"):
            if rest.startswith(name if isinstance(rest, str) else name.encode()):
                return f"{name} is not a JSON number"
    text = message.removeprefix("JSON is malformed: ")
    return f"not valid JSON: {text[0].lower()}{text[1:]}" if text else "not valid JSON"


def _number_reason(raw: bytes | str, message: str) -> str:
    """A number the generic decoder could not hold: too many digits for Python's int, or a float past a double's
    range (1e999). For the latter, the typed decoder names the field it is in."""
    if message.startswith("Integer value out of range"):
        return f"not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits"
    try:
        _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        if _ERROR.match(str(exc))["path"]:
            return _reason(str(exc), {"type": _type_of(raw)})
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        pass
    return "not valid JSON: a number out of range"


def _type_of(raw: bytes | str) -> str | None:
    m = re.search(rb'"type"\s*:\s*"(\w+)"' if isinstance(raw, bytes) else r'"type"\s*:\s*"(\w+)"', raw)
    return m[1].decode() if m and isinstance(m[1], bytes) else (m[1] if m else None)
