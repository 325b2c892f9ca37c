"""KIP-848 consumer-group records (record types 3-8 and 16): Kafka's bytes, written out by hand from the
ConsumerGroup*.json schemas, every type and version round-tripping byte for byte, tagged fields present and absent,
unknown tagged fields kept, tombstones, and the store keeping one value per Kafka key on both backends."""

from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsets_store import CodecError, decode_record, encode_record, open_store, partition_for
from offsets_store.codec import CONSUMER_GROUP_TYPES, record_key
from offsets_store.describe import main as describe_main

TS = 1_700_000_000_000


# ------------------------------------------------------------------ Kafka's encodings, by hand (not with wire.py)
# Keys: int16 record type, then non-flexible strings (int16 length + UTF-8). Values: int16 version 0, then the
# flexible body: compact strings/bytes/arrays = unsigned varint (length + 1, 0 = null) + data; every struct ends
# with its tagged fields: varint count, then per field varint tag, varint size, data. Uuid = 16 raw bytes.
def i8(n):
    return n.to_bytes(1, "big", signed=True)


def i16(n):
    return n.to_bytes(2, "big", signed=True)


def i32(n):
    return n.to_bytes(4, "big", signed=True)


def i64(n):
    return n.to_bytes(8, "big", signed=True)


def string(t):
    return i16(len(t.encode())) + t.encode()


def uv(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def cstr(t):
    return uv(0) if t is None else uv(len(t.encode()) + 1) + t.encode()


def cbytes(b):
    return uv(len(b) + 1) + b


def carr(items):
    return uv(len(items) + 1) + b"".join(items)


def tags(*fields):
    return uv(len(fields)) + b"".join(uv(tag) + uv(len(data)) + data for tag, data in fields)


NO_TAGS = tags()
ORDERS = uuid.UUID("5f2c0a1e-8b1d-4c3e-9a7f-1234567890ab")
AUDIT = uuid.UUID("00000000-0000-0000-0000-000000000001")
ORDERS_ID = base64.urlsafe_b64encode(ORDERS.bytes).decode().rstrip("=")  # Kafka's Uuid.toString()
AUDIT_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def key(record_type, *fields):
    return i16(record_type) + b"".join(string(f) for f in fields)


# (record dict, key bytes, value bytes) per type: the dicts are complete (every field, as decode_record gives them).
def metadata_case(hash_=0, created=-1):
    record = {
        "type": "consumer_group_metadata",
        "group_id": "grp",
        "epoch": 42,
        "metadataHash": hash_,
        "creationTimeMs": created,
    }
    tagged = ([(0, i64(hash_))] if hash_ else []) + ([(1, i64(created))] if created != -1 else [])
    return record, key(3, "grp"), i16(0) + i32(42) + tags(*tagged)


def partition_metadata_case():
    record = {
        "type": "consumer_group_partition_metadata",
        "group_id": "grp",
        "topics": [
            {
                "topicId": ORDERS_ID,
                "topicName": "orders",
                "numPartitions": 3,
                "partitionMetadata": [{"partition": 0, "racks": ["r1", "r2"]}],
            },
            {"topicId": AUDIT_ID, "topicName": "audit", "numPartitions": 1, "partitionMetadata": []},
        ],
    }
    topics = [
        ORDERS.bytes + cstr("orders") + i32(3) + carr([i32(0) + carr([cstr("r1"), cstr("r2")]) + NO_TAGS]) + NO_TAGS,
        AUDIT.bytes + cstr("audit") + i32(1) + carr([]) + NO_TAGS,
    ]
    return record, key(4, "grp"), i16(0) + carr(topics) + NO_TAGS


def member_case(classic=True):
    record = {
        "type": "consumer_group_member_metadata",
        "group_id": "grp",
        "member_id": "m-1",
        "instanceId": None,
        "rackId": "rack-a",
        "clientId": "app",
        "clientHost": "/10.0.0.7",
        "subscribedTopicNames": ["audit", "orders"],
        "subscribedTopicRegex": None,
        "rebalanceTimeoutMs": 300_000,
        "serverAssignor": "uniform",
        "classicMemberMetadata": None,
    }
    body = (
        cstr(None)
        + cstr("rack-a")
        + cstr("app")
        + cstr("/10.0.0.7")
        + carr([cstr("audit"), cstr("orders")])
        + cstr(None)
        + i32(300_000)
        + cstr("uniform")
    )
    if not classic:  # Kafka writes the null (its generated class's default is an empty struct, not null)
        return record, key(5, "grp", "m-1"), i16(0) + body + tags((0, uv(0)))
    record["classicMemberMetadata"] = {
        "sessionTimeoutMs": 45_000,
        "supportedProtocols": [{"name": "range", "metadata": base64.b64encode(b"\x00\x03sub").decode()}],
    }
    # A tagged nullable struct: varint 1 (not null), the struct (with its own tag section), all inside the tag's size.
    classic_body = uv(1) + i32(45_000) + carr([cstr("range") + cbytes(b"\x00\x03sub") + NO_TAGS]) + NO_TAGS
    return record, key(5, "grp", "m-1"), i16(0) + body + tags((0, classic_body))


def target_metadata_case(timestamp=0):
    record = {
        "type": "consumer_group_target_assignment_metadata",
        "group_id": "grp",
        "assignmentEpoch": 42,
        "assignmentTimestamp": timestamp,
    }
    return record, key(6, "grp"), i16(0) + i32(42) + tags(*([(0, i64(timestamp))] if timestamp else []))


def target_member_case():
    record = {
        "type": "consumer_group_target_assignment_member",
        "group_id": "grp",
        "member_id": "m-1",
        "topicPartitions": [{"topicId": ORDERS_ID, "partitions": [0, 2]}, {"topicId": AUDIT_ID, "partitions": []}],
    }
    value = i16(0) + carr([ORDERS.bytes + carr([i32(0), i32(2)]) + NO_TAGS, AUDIT.bytes + carr([]) + NO_TAGS]) + NO_TAGS
    return record, key(7, "grp", "m-1"), value


def current_case(epochs=None):
    record = {
        "type": "consumer_group_current_member_assignment",
        "group_id": "grp",
        "member_id": "m-1",
        "memberEpoch": 42,
        "previousMemberEpoch": 41,
        "state": 1,
        "assignedPartitions": [{"topicId": ORDERS_ID, "partitions": [0, 2], "assignmentEpochs": epochs}],
        "partitionsPendingRevocation": [{"topicId": AUDIT_ID, "partitions": [5], "assignmentEpochs": None}],
    }
    assigned_tags = tags((0, carr([i32(e) for e in epochs]))) if epochs is not None else NO_TAGS
    value = (
        i16(0)
        + i32(42)
        + i32(41)
        + i8(1)
        + carr([ORDERS.bytes + carr([i32(0), i32(2)]) + assigned_tags])
        + carr([AUDIT.bytes + carr([i32(5)]) + NO_TAGS])
        + NO_TAGS
    )
    return record, key(8, "grp", "m-1"), value


def regex_case():
    record = {
        "type": "consumer_group_regular_expression",
        "group_id": "grp",
        "regular_expression": "orders-.*",
        "topics": ["orders-eu", "orders-us"],
        "version": 7,
        "timestamp": TS,
    }
    value = i16(0) + carr([cstr("orders-eu"), cstr("orders-us")]) + i64(7) + i64(TS) + NO_TAGS
    return record, key(16, "grp", "orders-.*"), value


CASES = {
    "metadata": metadata_case(),
    "metadata+hash": metadata_case(hash_=-123456789),
    "metadata+hash+creation": metadata_case(hash_=99, created=TS),
    "metadata+creation": metadata_case(created=TS),
    "partition_metadata": partition_metadata_case(),
    "member": member_case(classic=False),
    "member+classic": member_case(),
    "target_metadata": target_metadata_case(),
    "target_metadata+timestamp": target_metadata_case(TS),
    "target_member": target_member_case(),
    "current": current_case(),
    "current+epochs": current_case([40, 42]),
    "current+empty_epochs": current_case([]),
    "regex": regex_case(),
}


@pytest.mark.parametrize("name", CASES)
def test_golden_bytes_both_ways(name):
    record, k, v = CASES[name]
    assert encode_record(dict(record)) == (k, v)
    assert decode_record(k, v) == {**record, "tombstone": False, "value_version": 0}
    assert encode_record(decode_record(k, v)) == (k, v)


def test_every_record_type_is_covered():
    assert {c[0]["type"] for c in CASES.values()} == set(CONSUMER_GROUP_TYPES)
    assert {c[1][:2] for c in CASES.values()} == {i16(t) for t in (3, 4, 5, 6, 7, 8, 16)}


def test_literal_bytes():
    # A few spelled out in full, so the helpers above are checked too.
    _, k, v = metadata_case()
    assert (k.hex(), v.hex()) == ("0003" + "0003677270", "0000" + "0000002a" + "00")
    _, k, v = metadata_case(hash_=1)
    assert v.hex() == "00000000002a" + "01" + "00" + "08" + "0000000000000001"
    _, k, v = target_member_case()
    assert k.hex() == "0007" + "0003677270" + "00036d2d31"
    assert v.hex() == (
        "0000"
        + "03"
        + ORDERS.bytes.hex()
        + "03"
        + "00000000"
        + "00000002"
        + "00"
        + "00000000000000000000000000000001"
        + "01"
        + "00"
        + "00"
    )


def test_defaults_may_be_left_out_and_tagged_defaults_are_not_written():
    _, k, v = metadata_case()
    assert encode_record({"type": "consumer_group_metadata", "group_id": "grp", "epoch": 42}) == (k, v)
    record, k, v = member_case(classic=False)
    lean = {f: x for f, x in record.items() if f not in ("rebalanceTimeoutMs",)}
    assert encode_record({**lean, "rebalanceTimeoutMs": -1}) == encode_record(lean)
    _, v = encode_record(lean)
    assert decode_record(k, v)["rebalanceTimeoutMs"] == -1  # the schema's default
    # A tagged field present at its default (Kafka never writes one) is read; writing drops it, as Kafka does.
    _, k, v = metadata_case()
    explicit = v[:-1] + tags((0, i64(0)))
    assert decode_record(k, explicit)["metadataHash"] == 0
    assert encode_record(decode_record(k, explicit)) == (k, v)


def test_required_fields_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="epoch"):
        encode_record({"type": "consumer_group_metadata", "group_id": "g"})
    record = CASES["target_member"][0]
    with pytest.raises(ValueError, match="member_id"):
        encode_record({k: v for k, v in record.items() if k != "member_id"})
    with pytest.raises(ValueError, match="Uuid"):
        encode_record({**record, "topicPartitions": [{"topicId": "not-a-uuid", "partitions": []}]})
    with pytest.raises(ValueError):
        encode_record({**record, "topicPartitions": None})  # not nullable


def test_topic_ids_in_every_form_give_the_same_bytes():
    record, k, v = target_member_case()
    for form in (ORDERS, str(ORDERS), ORDERS.bytes, ORDERS_ID):
        tps = [{"topicId": form, "partitions": [0, 2]}, {"topicId": AUDIT_ID, "partitions": []}]
        assert encode_record({**record, "topicPartitions": tps}) == (k, v)


def test_kafka_key_field_names_are_accepted():
    record, k, v = current_case()
    kafka_named = {f: x for f, x in record.items() if f not in ("group_id", "member_id")}
    assert encode_record({**kafka_named, "groupId": "grp", "memberId": "m-1"}) == (k, v)


@pytest.mark.parametrize(
    "name", ["metadata", "member+classic", "target_metadata", "target_member", "current", "regex", "partition_metadata"]
)
def test_tombstones(name):
    record, k, _ = CASES[name]
    assert encode_record({**record, "tombstone": True}) == (k, None)
    key_only = {f: record[f] for f in ("type", "group_id", "member_id", "regular_expression") if f in record}
    assert encode_record({**key_only, "tombstone": True}) == (k, None)
    assert decode_record(k, None) == {**key_only, "tombstone": True}


def test_keys_are_kafkas_compaction_keys():
    member = CASES["member"][0]
    # Same group + member id = same key whatever the value; another member or group = another key.
    assert record_key(member) == record_key({**member, "clientId": "other", "rebalanceTimeoutMs": 1})
    assert record_key(member) != record_key({**member, "member_id": "m-2"})
    assert record_key(member) != record_key({**member, "group_id": "grp2"})
    # The three member-keyed types share group + member id but not the record type.
    assert len({record_key(CASES[n][0]) for n in ("member", "target_member", "current")}) == 3
    assert record_key(CASES["regex"][0]) != record_key({**CASES["regex"][0], "regular_expression": "x"})


def test_unknown_tagged_fields_are_kept_in_place():
    # A newer broker's tags: 5 at the top (after the known 0 and 1), 3 inside an assigned topic, 2 inside the
    # classic member metadata. They come back where they were, between the known tags by number.
    _, k, v = metadata_case(hash_=7, created=TS)
    newer = v[: -(1 + 2 * (2 + 8))] + tags((0, i64(7)), (1, i64(TS)), (5, b"\x01\x02"))
    record = decode_record(k, newer)
    assert (record["metadataHash"], record["creationTimeMs"]) == (7, TS)
    assert record["_unknownTaggedFields"] == [[5, "AQI="]]
    assert encode_record(record) == (k, newer)
    with pytest.raises(CodecError):  # a known tag whose size does not match its type
        decode_record(k, i16(0) + i32(42) + tags((0, i64(7)), (1, b"\xff")))
    between = i16(0) + i32(42) + tags((1, i64(TS)), (2, b"x"), (3, b""))  # unknown ones after the known tag 1
    assert decode_record(k, between)["_unknownTaggedFields"] == [[2, "eA=="], [3, ""]]
    assert encode_record(decode_record(k, between)) == (k, between)
    before = i16(0) + i32(42) + tags((0, b"\x00" * 7 + b"\x07"), (1, i64(TS)))
    assert encode_record(decode_record(k, before)) == (k, before)

    _, k, v = current_case([40, 42])
    tagged_topic = v.replace(tags((0, carr([i32(40), i32(42)]))), tags((0, carr([i32(40), i32(42)])), (3, b"z")))
    record = decode_record(k, tagged_topic)
    assert record["assignedPartitions"][0]["_unknownTaggedFields"] == [[3, "eg=="]]
    assert encode_record(record) == (k, tagged_topic)

    _, k, _ = member_case()
    classic_body = uv(1) + i32(45_000) + carr([cstr("range") + cbytes(b"\x00\x03sub") + NO_TAGS]) + tags((2, b"q"))
    head = i16(0) + (
        cstr(None)
        + cstr("rack-a")
        + cstr("app")
        + cstr("/10.0.0.7")
        + carr([cstr("audit"), cstr("orders")])
        + cstr(None)
        + i32(300_000)
        + cstr("uniform")
    )
    value = head + tags((0, classic_body))
    record = decode_record(k, value)
    assert record["classicMemberMetadata"]["_unknownTaggedFields"] == [[2, "cQ=="]]
    assert encode_record(record) == (k, value)


def test_classic_member_metadata_null_and_absent_are_kept_apart_as_kafka_does():
    """Kafka's generated ConsumerGroupMemberMetadataValue defaults classicMemberMetadata to an empty struct: a
    consumer-protocol member's null is written (tag 0, one byte 0: Apache Kafka 4.4.0 writes it so), and a value
    without the tag reads as the empty struct, which is not written."""
    record, k, v = member_case(classic=False)
    assert v.endswith(tags((0, uv(0)))) and decode_record(k, v)["classicMemberMetadata"] is None
    assert encode_record(record) == (k, v)
    absent = v[: -len(tags((0, uv(0))))] + NO_TAGS
    read = decode_record(k, absent)
    assert read["classicMemberMetadata"] == {"sessionTimeoutMs": 0, "supportedProtocols": []}
    assert encode_record(read) == (k, absent)
    assert encode_record({f: x for f, x in record.items() if f != "classicMemberMetadata"}) == (k, absent)


# A consumer-protocol member's metadata as Apache Kafka 4.4.0 wrote it (confluent-kafka 2.16, group.protocol=consumer)
BROKER_MEMBER_KEY = "0005000b6b3834382d3932363332300016684e2f734b4268625274714e314f5a337a7556575141"
BROKER_MEMBER_VALUE = "000000000363300b2f3132372e302e302e310209612d39323633323001000493e00001000100"


def test_a_member_record_kafka_4_4_wrote_round_trips():
    k, v = bytes.fromhex(BROKER_MEMBER_KEY), bytes.fromhex(BROKER_MEMBER_VALUE)
    record = decode_record(k, v)
    assert (
        record["clientId"],
        record["clientHost"],
        record["subscribedTopicNames"],
        record["rebalanceTimeoutMs"],
        record["serverAssignor"],
        record["classicMemberMetadata"],
    ) == ("c0", "/127.0.0.1", ["a-926320"], 300_000, None, None)
    assert encode_record(record) == (k, v)


@pytest.mark.parametrize("name", CASES)
def test_truncated_and_trailing_bytes_are_codec_errors(name):
    _, k, v = CASES[name]
    for cut in range(len(v)):
        with pytest.raises(CodecError):
            decode_record(k, v[:cut])
    with pytest.raises(CodecError):
        decode_record(k, v + b"\x00")
    with pytest.raises(CodecError):
        decode_record(k[:-1], v)
    with pytest.raises(CodecError):  # only version 0 exists
        decode_record(k, i16(1) + v[2:])


def test_null_in_a_non_nullable_array_is_a_codec_error():
    _, k, _ = target_member_case()
    with pytest.raises(CodecError):
        decode_record(k, i16(0) + uv(0) + NO_TAGS)


@settings(max_examples=300, deadline=None)
@given(record_type=st.sampled_from([3, 4, 5, 6, 7, 8, 16]), body=st.binary(max_size=80))
def test_random_values_raise_only_codec_errors(record_type, body):
    k = key(record_type, "g", "m") if record_type in (5, 7, 8, 16) else key(record_type, "g")
    try:
        record = decode_record(k, i16(0) + body)
    except CodecError:
        return
    # Whatever decodes re-encodes to bytes that decode to the same record.
    assert decode_record(*encode_record(record)) == record


ids = st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))
text = st.text(max_size=10)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
tps = st.lists(st.fixed_dictionaries({"topicId": ids, "partitions": st.lists(int32, max_size=4)}), max_size=3)
current_tps = st.lists(
    st.fixed_dictionaries(
        {
            "topicId": ids,
            "partitions": st.lists(int32, max_size=4),
            "assignmentEpochs": st.none() | st.lists(int32, max_size=4),
        }
    ),
    max_size=3,
)
classic = st.fixed_dictionaries(
    {
        "sessionTimeoutMs": int32,
        "supportedProtocols": st.lists(
            st.fixed_dictionaries(
                {"name": text, "metadata": st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode())}
            ),
            max_size=2,
        ),
    }
)
RECORDS = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_metadata"),
            "group_id": text,
            "epoch": int32,
            "metadataHash": int64,
            "creationTimeMs": int64,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_partition_metadata"),
            "group_id": text,
            "topics": st.lists(
                st.fixed_dictionaries(
                    {
                        "topicId": ids,
                        "topicName": text,
                        "numPartitions": int32,
                        "partitionMetadata": st.lists(
                            st.fixed_dictionaries({"partition": int32, "racks": st.lists(text, max_size=2)}), max_size=2
                        ),
                    }
                ),
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_member_metadata"),
            "group_id": text,
            "member_id": text,
            "instanceId": st.none() | text,
            "rackId": st.none() | text,
            "clientId": text,
            "clientHost": text,
            "subscribedTopicNames": st.lists(text, max_size=3),
            "subscribedTopicRegex": st.none() | text,
            "rebalanceTimeoutMs": int32,
            "serverAssignor": st.none() | text,
            "classicMemberMetadata": st.none() | classic,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_target_assignment_metadata"),
            "group_id": text,
            "assignmentEpoch": int32,
            "assignmentTimestamp": int64,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_target_assignment_member"),
            "group_id": text,
            "member_id": text,
            "topicPartitions": tps,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_current_member_assignment"),
            "group_id": text,
            "member_id": text,
            "memberEpoch": int32,
            "previousMemberEpoch": int32,
            "state": st.integers(-128, 127),
            "assignedPartitions": current_tps,
            "partitionsPendingRevocation": current_tps,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("consumer_group_regular_expression"),
            "group_id": text,
            "regular_expression": text,
            "topics": st.lists(text, max_size=3),
            "version": int64,
            "timestamp": int64,
        }
    ),
)


@settings(max_examples=400, deadline=None)
@given(record=RECORDS)
def test_record_dicts_round_trip(record):
    k, v = encode_record(record)
    decoded = decode_record(k, v)
    assert decoded == {**record, "tombstone": False, "value_version": 0}
    assert encode_record(decoded) == (k, v)


# ------------------------------------------------------------------ the store
def group_records(group="grp", epoch=42, members=("m-1", "m-2")):
    out = [
        {"type": "consumer_group_metadata", "group_id": group, "epoch": epoch},
        {
            "type": "consumer_group_partition_metadata",
            "group_id": group,
            "topics": [{"topicId": ORDERS_ID, "topicName": "orders", "numPartitions": 4}],
        },
        {"type": "consumer_group_target_assignment_metadata", "group_id": group, "assignmentEpoch": epoch},
        {
            "type": "consumer_group_regular_expression",
            "group_id": group,
            "regular_expression": "ord.*",
            "topics": ["orders"],
            "version": 1,
            "timestamp": TS,
        },
    ]
    for i, m in enumerate(members):
        mine = [p for p in range(4) if p % len(members) == i]
        out += [
            {**member_case(classic=False)[0], "group_id": group, "member_id": m, "clientId": f"app-{m}"},
            {
                "type": "consumer_group_target_assignment_member",
                "group_id": group,
                "member_id": m,
                "topicPartitions": [{"topicId": ORDERS_ID, "partitions": mine}],
            },
            {
                "type": "consumer_group_current_member_assignment",
                "group_id": group,
                "member_id": m,
                "memberEpoch": epoch,
                "previousMemberEpoch": epoch - 1,
                "state": 0,
                "assignedPartitions": [{"topicId": ORDERS_ID, "partitions": mine}],
                "partitionsPendingRevocation": [],
            },
        ]
    return out


def check_compaction(url):
    store = open_store(url)
    store.write(group_records(epoch=1) + group_records(group="other", epoch=3, members=("x",)), batch_id=0)
    store.write(group_records(epoch=2, members=("m-1", "m-2")), batch_id=1)  # every key again: latest wins
    # m-2 leaves: its three records are deleted; the group moves to epoch 3 with m-1 owning everything.
    leave = [
        {"type": t, "group_id": "grp", "member_id": "m-2", "tombstone": True}
        for t in (
            "consumer_group_member_metadata",
            "consumer_group_target_assignment_member",
            "consumer_group_current_member_assignment",
        )
    ]
    store.write(
        leave
        + [r for r in group_records(epoch=3, members=("m-1",)) if r["type"] != "consumer_group_regular_expression"]
        + [
            {
                "type": "consumer_group_regular_expression",
                "group_id": "grp",
                "regular_expression": "ord.*",
                "tombstone": True,
            }
        ],
        batch_id=2,
    )
    store.close()

    reopened = open_store(url)
    records = reopened.load_records()
    kip848 = [r for r in records if r["type"] in CONSUMER_GROUP_TYPES]
    per_key = {encode_record(r)[0] for r in kip848}
    assert len(per_key) == len(kip848) == (3 + 3) + (4 + 3)  # grp: 3 group-level + m-1's 3; other: 4 + x's 3
    state = reopened.consumer_group("grp")
    assert (state["group_epoch"], state["assignment_epoch"]) == (3, 3)
    assert state["topic_names"] == {ORDERS_ID: "orders"} and state["regular_expressions"] == {}
    assert set(state["members"]) == {"m-1"}
    m1 = state["members"]["m-1"]
    assert m1["current_assignment"]["memberEpoch"] == 3 and m1["current_assignment"]["previousMemberEpoch"] == 2
    assert m1["target_assignment"] == [{"topicId": ORDERS_ID, "partitions": [0, 1, 2, 3]}]
    assert m1["metadata"]["clientId"] == "app-m-1" and m1["metadata"]["subscribedTopicNames"] == ["audit", "orders"]
    other = reopened.consumer_group("other")
    assert other["group_epoch"] == 3 and set(other["members"]) == {"x"}
    assert other["regular_expressions"] == {"ord.*": {"topics": ["orders"], "version": 1, "timestamp": TS}}
    assert reopened.consumer_group("nobody") is None
    assert reopened.groups() == ["grp", "other"]
    # The bytes stored are Kafka's: each live record's key and value as the codec writes them.
    raw = dict(reopened.raw_records())
    for r in kip848:
        k, v = encode_record(r)
        assert raw[k] == v
    # The whole group deleted: tombstones for every key leave nothing of it.
    everything = [
        {**{f: r[f] for f in ("type", "group_id", "member_id", "regular_expression") if f in r}, "tombstone": True}
        for r in kip848
        if r["group_id"] == "grp"
    ]
    reopened.write(everything, batch_id=3)
    reopened.close()
    final = open_store(url)
    assert final.consumer_group("grp") is None and final.consumer_group("other")["group_epoch"] == 3
    final.close()


def test_sqlite_store_compacts_consumer_group_records_per_key(tmp_path):
    check_compaction(f"sqlite:{tmp_path / 'o.db'}")


@pytest.mark.kafka
def test_kafka_store_compacts_consumer_group_records_per_key(kafka_bootstrap, topic_name):
    url = f"kafka:{kafka_bootstrap}/{topic_name}?partitions=3"
    check_compaction(url)
    # On the topic, every record of a group sits in partition_for(group), as in __consumer_offsets.
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen = 0
    for message in consumer:
        record = decode_record(message.key, message.value)
        if record["type"] in CONSUMER_GROUP_TYPES:
            assert message.partition == partition_for(record["group_id"], 3)
            seen += 1
    consumer.close()
    assert seen > 0


def test_describe_shows_consumer_protocol_members_with_epochs(tmp_path, capsys):
    url = f"sqlite:{tmp_path / 'o.db'}"
    with open_store(url) as store:
        store.write(
            group_records(epoch=5)
            + [
                {
                    "type": "offset_commit",
                    "group_id": "grp",
                    "topic": "orders",
                    "partition": 0,
                    "offset": 9,
                    "leader_epoch": -1,
                    "metadata": "",
                    "commit_timestamp": TS,
                    "expire_timestamp": -1,
                }
            ],
            batch_id=0,
        )
    assert describe_main(["--group", "grp", "--store", url, "--bootstrap", ""]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[1:] == [
        ["grp", "orders", "0", "9", "-", "-", "m-1", "/10.0.0.7", "app-m-1", "-"],
        ["grp", "orders", "1", "-", "-", "-", "m-2", "/10.0.0.7", "app-m-2", "-"],
        ["grp", "orders", "2", "-", "-", "-", "m-1", "/10.0.0.7", "app-m-1", "-"],
        ["grp", "orders", "3", "-", "-", "-", "m-2", "/10.0.0.7", "app-m-2", "-"],
    ]
    assert describe_main(["--group", "grp", "--store", url, "--members"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == [
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "EPOCH",
        "TARGET-EPOCH",
        "STATE",
    ]
    assert lines[1:] == [
        ["grp", "m-1", "-", "/10.0.0.7", "app-m-1", "2", "5", "5", "STABLE"],
        ["grp", "m-2", "-", "/10.0.0.7", "app-m-2", "2", "5", "5", "STABLE"],
    ]
