"""The __consumer_offsets codec: Kafka's exact bytes, every version, and no crash on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsets_store import CodecError, decode_record, encode_record, partition_for
from offsets_store import schemas as s
from offsets_store.codec import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    record_identity,
    record_key,
)
from assignors.java import java_string_hash
from offsets_store.wire import decode, encode

TS = 1_700_000_000_000

# Example encodings from ../shared/reference/consumer_offsets_format.md
OFFSET_KEY_V1 = "000100086d792d67726f757000066f726465727300000003"
OFFSET_KEY_V0 = "000000086d792d67726f757000066f726465727300000003"
GROUP_KEY_V2 = "000200086d792d67726f7570"
OFFSET_VALUE_V3 = "0003000000000000002a0000000500000000018bcfe56800"
OFFSET_VALUE_V1 = "0001000000000000002a00000000018bcfe568000000018bd50bc400"
OFFSET_VALUE_V4 = "0004000000000000002a00000005010000018bcfe5680000"
SUBSCRIPTION_V0 = "00000000000100066f7264657273ffffffff"
ASSIGNMENT_V0 = "00000000000100066f726465727300000003000000000000000100000002ffffffff"
GROUP_VALUE_V3 = (
    "00030008636f6e73756d657200000001000572616e676500026d310000018bcfe568000000000100026d310002693100026331"
    "000a2f3132372e302e302e31000493e00000afc80000001200000000000100066f7264657273ffffffff00000022000000"
    "00000100066f726465727300000003000000000000000100000002ffffffff"
)
GROUP_VALUE_V3_EMPTY = "00030008636f6e73756d657200000002ffffffff0000018bcfe5680000000000"

# GroupMetadataValue v0 as Apache Kafka 0.9.0.1 wrote it (read from its __consumer_offsets): generation 2 of group
# "g1", range, members c0 (the leader) and c1 with 6 s sessions and no rebalance timeout in this version.
KAFKA_09_GROUP_KEY = "000200026731"
KAFKA_09_GROUP_VALUE = (
    "00000008636f6e73756d657200000002000572616e6765002763302d65316332333665382d653432342d346231352d623766612d6264"
    "3731316632336562376300000002002763302d65316332333665382d653432342d346231352d623766612d6264373131663233656237"
    "6300026330000a2f3132372e302e302e3100001770000000100000000000010004646174610000000000000020000000000001000464"
    "6174610000000300000000000000010000000200000000002763312d35306334613663382d636431312d346462302d393438332d3861"
    "3062316533633232616500026331000a2f3132372e302e302e31000017700000001000000000000100046461746100000000000000200"
    "000000000010004646174610000000300000003000000040000000500000000"
)
KAFKA_09_OFFSET_KEY = "00010002673100046461746100000000"  # OffsetCommitKey v1: g1 / data / 0
KAFKA_09_OFFSET_VALUE = "000100000000000000050000000001a20885aef3000001a20dac0af3"  # value v1, with expiry


def offset_record(**kw) -> dict:
    record = {
        "type": "offset_commit",
        "group_id": "my-group",
        "topic": "orders",
        "partition": 3,
        "offset": 42,
        "leader_epoch": 5,
        "metadata": "",
        "commit_timestamp": TS,
        "expire_timestamp": -1,
        "tombstone": False,
    }
    record.update(kw)
    return record


def test_offset_commit_key_and_value_bytes():
    key, value = encode_record(offset_record())
    assert key.hex() == OFFSET_KEY_V1 and value.hex() == OFFSET_VALUE_V4  # Kafka 4.1+
    assert encode_record(offset_record(value_version=3))[1].hex() == OFFSET_VALUE_V3  # Kafka 4.0


def test_explicit_expiry_is_written_as_value_v1():
    _, value = encode_record(offset_record(leader_epoch=-1, expire_timestamp=1_700_086_400_000))
    assert value.hex() == OFFSET_VALUE_V1


def test_flexible_v4_value_and_v0_key_decode():
    decoded = decode_record(bytes.fromhex(OFFSET_KEY_V0), bytes.fromhex(OFFSET_VALUE_V4))
    assert (decoded["group_id"], decoded["topic"], decoded["partition"]) == ("my-group", "orders", 3)
    assert (decoded["offset"], decoded["leader_epoch"], decoded["commit_timestamp"], decoded["value_version"]) == (
        42,
        5,
        TS,
        4,
    )
    assert (
        encode(s.OFFSET_COMMIT_VALUE, 4, {"offset": 42, "leaderEpoch": 5, "metadata": "", "commitTimestamp": TS}).hex()
        == OFFSET_VALUE_V4
    )


def test_offset_value_versions_0_and_2_share_a_layout_without_epoch():
    for version in (0, 2):
        data = encode(s.OFFSET_COMMIT_VALUE, version, {"offset": 7, "metadata": "m", "commitTimestamp": TS})
        record = decode_record(bytes.fromhex(OFFSET_KEY_V1), data)
        assert (record["offset"], record["leader_epoch"], record["metadata"], record["expire_timestamp"]) == (
            7,
            -1,
            "m",
            -1,
        )


def test_group_metadata_value_bytes():
    record = decode_record(bytes.fromhex(GROUP_KEY_V2), bytes.fromhex(GROUP_VALUE_V3))
    assert record["protocol"] == "range" and record["leader"] == "m1" and record["generation"] == 1
    (member,) = record["members"]
    assert (member["member_id"], member["group_instance_id"], member["client_id"], member["client_host"]) == (
        "m1",
        "i1",
        "c1",
        "/127.0.0.1",
    )
    assert (member["rebalance_timeout"], member["session_timeout"]) == (300_000, 45_000)
    assert member["subscription"]["topics"] == ["orders"]
    assert member["assignment"]["partitions"] == [["orders", 0], ["orders", 1], ["orders", 2]]
    # Our writer uses consumer protocol v3 inside; with v0 embedded bytes it reproduces the example exactly.
    value = encode(
        s.GROUP_METADATA_VALUE,
        3,
        {
            "protocolType": "consumer",
            "generation": 1,
            "protocol": "range",
            "leader": "m1",
            "currentStateTimestamp": TS,
            "members": [
                {
                    "memberId": "m1",
                    "groupInstanceId": "i1",
                    "clientId": "c1",
                    "clientHost": "/127.0.0.1",
                    "rebalanceTimeout": 300_000,
                    "sessionTimeout": 45_000,
                    "subscription": encode_subscription({"topics": ["orders"]}, version=0),
                    "assignment": encode_assignment({"partitions": [["orders", p] for p in range(3)]}, version=0),
                }
            ],
        },
    )
    assert value.hex() == GROUP_VALUE_V3


def test_empty_group_metadata_bytes():
    record = {
        "type": "group_metadata",
        "group_id": "my-group",
        "tombstone": False,
        "protocol_type": "consumer",
        "generation": 2,
        "protocol": None,
        "leader": None,
        "current_state_timestamp": TS,
        "members": [],
    }
    key, value = encode_record(record)
    assert key.hex() == GROUP_KEY_V2 and value.hex() == GROUP_VALUE_V3_EMPTY


def test_embedded_consumer_protocol_bytes():
    assert encode_subscription({"topics": ["orders"]}, version=0).hex() == SUBSCRIPTION_V0
    assert (
        encode_assignment({"partitions": [["orders", 0], ["orders", 1], ["orders", 2]]}, version=0).hex()
        == ASSIGNMENT_V0
    )
    full = {
        "topics": ["a", "b"],
        "user_data": "AAE=",
        "owned_partitions": [["a", 1], ["b", 0]],
        "generation": 4,
        "rack": "r1",
    }
    for version in range(4):
        decoded = decode_subscription(encode_subscription(full, version))
        assert decoded["topics"] == ["a", "b"] and decoded["user_data"] == "AAE="
        assert decoded["owned_partitions"] == (full["owned_partitions"] if version >= 1 else [])
        assert decoded["generation"] == (4 if version >= 2 else -1)
        assert decoded["rack"] == ("r1" if version >= 3 else None)
    assert decode_assignment(encode_assignment({"partitions": [["b", 2], ["a", 0]], "user_data": None}))[
        "partitions"
    ] == [["a", 0], ["b", 2]]


def test_tombstones():
    key, value = encode_record(
        {"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 0, "tombstone": True}
    )
    assert value is None and decode_record(key, None) == {
        "type": "offset_commit",
        "group_id": "g",
        "topic": "t",
        "partition": 0,
        "key_version": 1,
        "tombstone": True,
    }
    key, value = encode_record({"type": "group_metadata", "group_id": "g", "tombstone": True})
    assert value is None and decode_record(key, None)["tombstone"] is True


def test_unknown_key_versions_are_reported_not_fatal():
    # Share and streams group records (Kafka's CoordinatorRecordType numbers) are recognised, not decoded.
    record = decode_record(b"\x00\x0b\x00\x01g", b"\x00\x00anything")
    assert record["type"] == "unknown" and record["key_version"] == 11
    assert record["record_type"] == "ShareGroupMetadata"
    names = {
        9: "ShareGroupPartitionMetadata",
        15: "ShareGroupStatePartitionMetadata",
        17: "StreamsGroupMetadata",
        23: "StreamsGroupTopology",
        24: "StreamsGroupTargetAssignmentResolvedTopicIds",
    }
    for version, name in names.items():
        assert decode_record(_i16(version) + b"\x00\x01g", None)["record_type"] == name
    assert decode_record(b"\x00\x63\x00\x01g", None)["record_type"] == "unknown"


def test_round_trip_of_coordinator_records():
    from tests.coordinator_harness import Harness

    h = Harness(assignment_mode="tracker")
    h.send(type="topic_metadata", topic="t", partitions=4)
    a, b = h.stable_group(2)
    h.commit(member_id=a, generation=1, offsets=[("t", 0, 5), ("t", 3, 9)])
    records = [o for o in h.outputs if o["type"] in ("offset_commit", "group_metadata")]
    assert records
    for record in records:
        key, value = encode_record(record)
        decoded = decode_record(key, value)
        for field in ("group_id", "generation", "protocol", "leader", "offset", "topic", "partition", "metadata"):
            assert decoded.get(field) == record.get(field)
        if record["type"] == "group_metadata":
            for got, want in zip(decoded["members"], record["members"]):
                assert got["assignment"]["partitions"] == want["assignment"]["partitions"]
                assert got["subscription"]["topics"] == want["subscription"]["topics"]
                assert got["member_id"] == want["member_id"]


@settings(max_examples=600, deadline=None)
@given(key=st.binary(max_size=40), value=st.none() | st.binary(max_size=120))
def test_random_bytes_never_raise_anything_but_codec_error(key, value):
    try:
        decode_record(key, value)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), version=st.integers(0, 4))
def test_random_value_bodies_with_valid_keys(data, version):
    for key in (bytes.fromhex(OFFSET_KEY_V1), bytes.fromhex(GROUP_KEY_V2)):
        try:
            decode_record(key, version.to_bytes(2, "big") + data)
        except CodecError:
            pass


@settings(max_examples=200, deadline=None)
@given(
    group=st.text(max_size=20),
    topic=st.text(min_size=1, max_size=20),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    metadata=st.text(max_size=30),
    epoch=st.integers(-1, 2**31 - 1),
)
def test_offset_records_round_trip(group, topic, partition, offset, metadata, epoch):
    record = offset_record(
        group_id=group, topic=topic, partition=partition, offset=offset, metadata=metadata, leader_epoch=epoch
    )
    decoded = decode_record(*encode_record(record))
    assert {k: decoded[k] for k in record} == record


@settings(max_examples=200, deadline=None)
@given(
    group=st.text(max_size=20),
    topic=st.text(max_size=20),
    partition=st.integers(-(2**31), 2**31 - 1),
    offset=st.integers(-(2**63), 2**63 - 1),
    metadata=st.text(max_size=30),
    epoch=st.integers(-(2**31), 2**31 - 1),
    ts=st.integers(-(2**63), 2**63 - 1),
)
def test_fast_offset_encoder_equals_the_schema_walker(group, topic, partition, offset, metadata, epoch, ts):
    for topic_id in (None, "T1-A4s3VTwiI5CTbEp6POw"):
        named = {"topic_id": topic_id} if topic_id else {}
        key, value = encode_record(
            offset_record(
                group_id=group,
                topic=topic,
                partition=partition,
                offset=offset,
                metadata=metadata,
                leader_epoch=epoch,
                commit_timestamp=ts,
                **named,
            )
        )
        assert key == encode(s.OFFSET_COMMIT_KEY, 1, {"group": group, "topic": topic, "partition": partition})
        assert value == encode(
            s.OFFSET_COMMIT_VALUE,
            4,
            {
                "offset": offset,
                "leaderEpoch": epoch,
                "metadata": metadata,
                "commitTimestamp": ts,
                "topicId": topic_id or "AAAAAAAAAAAAAAAAAAAAAA",
            },
        )


def test_decoding_is_strict_about_trailing_and_truncated_bytes():
    with pytest.raises(CodecError):
        decode(s.OFFSET_COMMIT_VALUE, bytes.fromhex(OFFSET_VALUE_V3 + "00"))
    with pytest.raises(CodecError):
        decode(s.OFFSET_COMMIT_VALUE, bytes.fromhex(OFFSET_VALUE_V3[:-4]))


@pytest.mark.parametrize(
    "group,expected_hash,p50,p2",
    [
        ("my-group", -1906497762, 12, 0),
        ("console-consumer-12345", 158455506, 6, 0),
        ("test-group", 627841412, 12, 0),
        ("payments", 1382682413, 13, 1),
        ("orders-consumer", -1204742690, 40, 0),
        ("group-0", 293427298, 48, 0),
        ("", 0, 0, 0),
        ("a", 97, 47, 1),
        ("connect-cluster", 1440343063, 13, 1),
        ("polygenelubricants", -2147483648, 0, 0),
        ("groupId", 293428218, 18, 0),
        ("otherGroup", -204443313, 13, 1),
    ],
)
def test_partition_for_matches_kafka(group, expected_hash, p50, p2):
    assert java_string_hash(group) == expected_hash
    assert partition_for(group) == p50 and partition_for(group, 2) == p2


def test_string_hash_uses_utf16_code_units():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: hashed as two code units, as Java does.
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)
    assert java_string_hash("é") == 0xE9


def test_record_key_refuses_other_types():
    with pytest.raises(ValueError):
        record_key({"type": "rebalance", "group_id": "g"})


def test_user_data_keeps_null_and_empty_apart():
    assert decode_subscription(encode_subscription({"topics": ["t"], "user_data": ""}))["user_data"] == ""
    assert decode_subscription(encode_subscription({"topics": ["t"], "user_data": None}))["user_data"] is None
    assert decode_assignment(encode_assignment({"partitions": [], "user_data": ""}))["user_data"] == ""


def test_strings_longer_than_kafkas_limit_are_refused_when_encoding():
    with pytest.raises(ValueError):
        encode_record(offset_record(metadata="x" * 40_000))
    with pytest.raises(ValueError):
        encode_record({"type": "group_metadata", "group_id": "g" * 40_000, "tombstone": True})


def _java_hash_reference(text: str) -> int:
    """Java's hashCode written out differently: split astral characters into surrogates by hand, wrap at the end
    with the closed form sum(c[i] * 31**(n-1-i)) mod 2**32."""
    units = []
    for ch in text:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = sum(c * 31 ** (len(units) - 1 - i) for i, c in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=300, deadline=None)
@given(group=st.text(max_size=30), partitions=st.integers(1, 200))
def test_partition_for_properties(group, partitions):
    h = _java_hash_reference(group)
    assert java_string_hash(group) == h
    # Java's Math.abs(MIN_VALUE) overflows to MIN_VALUE; Kafka's Utils.abs returns 0 for it, Math.abs otherwise.
    assert partition_for(group, partitions) == (abs(h) if h != -(2**31) else 0) % partitions
    assert 0 <= partition_for(group, partitions) < partitions


# ------------------------------------------------------------------ decode -> encode keeps every version's bytes
# Written out by hand from the layouts in consumer_offsets_format.md (not with the codec's schema walker), so the
# schemas themselves are checked too. Non-flexible: int16-length strings, int32-length bytes and arrays.
def _i16(n):
    return n.to_bytes(2, "big", signed=True)


def _i32(n):
    return n.to_bytes(4, "big", signed=True)


def _i64(n):
    return n.to_bytes(8, "big", signed=True)


def _str(t):
    return _i16(-1) if t is None else _i16(len(t.encode())) + t.encode()


def _bytes(b):
    return _i32(-1) if b is None else _i32(len(b)) + b


def _arr(items):
    return _i32(len(items)) + b"".join(items)


def _uv(n):
    return bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7])  # small varints only


def _cstr(t):
    return _uv(0) if t is None else _uv(len(t.encode()) + 1) + t.encode()  # compact (flexible)


def _cbytes(b):
    return _uv(len(b) + 1) + b


def _carr(items):
    return _uv(len(items) + 1) + b"".join(items)


def _subscription(version: int) -> bytes:
    body = _arr([_str("orders"), _str("audit")]) + _bytes(b"\x00\x01")
    if version >= 1:
        body += _arr([_str("orders") + _arr([_i32(0), _i32(2)])])
    if version >= 2:
        body += _i32(7)
    if version >= 3:
        body += _str("rack-a")
    return _i16(version) + body


def _assignment(version: int) -> bytes:
    return (
        _i16(version)
        + _arr([_str("audit") + _arr([_i32(1)]), _str("orders") + _arr([_i32(0), _i32(2)])])
        + _bytes(None)
    )


def _group_value(version: int, sub: bytes, assignment: bytes) -> bytes:
    if version == 4:  # flexible: compact everything, an empty tagged-field section after each struct
        member = (
            _cstr("m1")
            + _cstr("i1")
            + _cstr("c1")
            + _cstr("/10.0.0.1")
            + _i32(300_000)
            + _i32(45_000)
            + _cbytes(sub)
            + _cbytes(assignment)
            + _uv(0)
        )
        return (
            _i16(4) + _cstr("consumer") + _i32(5) + _cstr("range") + _cstr("m1") + _i64(TS) + _carr([member]) + _uv(0)
        )
    member = _str("m1") + (_str("i1") if version >= 3 else b"") + _str("c1") + _str("/10.0.0.1")
    member += (_i32(300_000) if version >= 1 else b"") + _i32(45_000) + _bytes(sub) + _bytes(assignment)
    head = _i16(version) + _str("consumer") + _i32(5) + _str("range") + _str("m1")
    return head + (_i64(TS) if version >= 2 else b"") + _arr([member])


def _offset_value(version: int) -> bytes:
    if version == 4:
        return _i16(4) + _i64(42) + _i32(5) + _cstr("meta") + _i64(TS) + _uv(0)
    body = _i64(42) + (_i32(5) if version >= 3 else b"") + _str("meta") + _i64(TS)
    return _i16(version) + body + (_i64(TS + 86_400_000) if version == 1 else b"")


@pytest.mark.parametrize("key_version", [0, 1])
@pytest.mark.parametrize("version", range(5))
def test_offset_commits_of_every_version_round_trip_byte_exact(key_version, version):
    key = _i16(key_version) + _str("my-group") + _str("orders") + _i32(3)
    value = _offset_value(version)
    record = decode_record(key, value)
    assert (record["offset"], record["metadata"], record["commit_timestamp"]) == (42, "meta", TS)
    assert record["leader_epoch"] == (5 if version >= 3 else -1)
    assert record["expire_timestamp"] == (TS + 86_400_000 if version == 1 else -1)
    assert encode_record(record) == (key, value)
    assert encode_record({**record, "tombstone": True}) == (key, None)


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("embedded", range(4))
def test_group_metadata_of_every_version_round_trip_byte_exact(version, embedded):
    key = _i16(2) + _str("my-group")
    value = _group_value(version, _subscription(embedded), _assignment(embedded))
    record = decode_record(key, value)
    (m,) = record["members"]
    assert (record["value_version"], m["subscription"]["version"], m["assignment"]["version"]) == (
        version,
        embedded,
        embedded,
    )
    assert m["group_instance_id"] == ("i1" if version >= 3 else None)
    # v0 has no rebalance timeout: Kafka's loader uses the session timeout.
    assert m["rebalance_timeout"] == (300_000 if version >= 1 else 45_000)
    assert record["current_state_timestamp"] == (TS if version >= 2 else -1)
    assert m["subscription"]["topics"] == ["orders", "audit"]
    assert m["assignment"]["partitions"] == [["audit", 1], ["orders", 0], ["orders", 2]]
    assert encode_record(record) == (key, value)


def test_reference_examples_round_trip_byte_exact():
    for key, value in (
        (OFFSET_KEY_V1, OFFSET_VALUE_V3),
        (OFFSET_KEY_V1, OFFSET_VALUE_V1),
        (OFFSET_KEY_V0, OFFSET_VALUE_V4),
        (GROUP_KEY_V2, GROUP_VALUE_V3),
        (GROUP_KEY_V2, GROUP_VALUE_V3_EMPTY),
    ):
        pair = (bytes.fromhex(key), bytes.fromhex(value))
        assert encode_record(decode_record(*pair)) == pair
    assert encode_subscription(decode_subscription(bytes.fromhex(SUBSCRIPTION_V0))).hex() == SUBSCRIPTION_V0
    assert encode_assignment(decode_assignment(bytes.fromhex(ASSIGNMENT_V0))).hex() == ASSIGNMENT_V0


def test_new_records_are_written_with_the_newest_versions():
    record = decode_record(bytes.fromhex(GROUP_KEY_V2), _group_value(0, _subscription(0), _assignment(0)))
    record.pop("value_version")
    for m in record["members"]:
        m["subscription"].pop("version")
        m["assignment"].pop("version")
    _, value = encode_record(record)
    again = decode_record(bytes.fromhex(GROUP_KEY_V2), value)
    assert again["value_version"] == 3
    assert again["members"][0]["subscription"]["version"] == again["members"][0]["assignment"]["version"] == 3
    assert encode_subscription({"topics": ["t"]})[:2] == encode_assignment({"partitions": []})[:2] == b"\x00\x03"
    key, value = encode_record(offset_record())
    assert key[:2] == b"\x00\x01" and value[:2] == b"\x00\x04"


def test_embedded_bytes_our_writer_would_lay_out_differently_are_kept():
    # kafka-python's range assignor sends a topic with no partitions to a member left without any; Java groups
    # partitions by topic in hash order. The broker stores the bytes as sent; so does a re-encoded record.
    unusual = _i16(0) + _arr([_str("orders") + _arr([_i32(2), _i32(0)]), _str("audit") + _arr([])]) + _bytes(b"")
    key = _i16(2) + _str("my-group")
    value = _group_value(1, _subscription(0), unusual)
    record = decode_record(key, value)
    assert record["members"][0]["assignment"]["partitions"] == [["orders", 2], ["orders", 0]]
    assert encode_record(record) == (key, value)
    # Bytes a consumer group's member could not be decoded from stay raw, and are written back as they were.
    value = _group_value(1, b"\x00\x09junk", unusual)
    assert encode_record(decode_record(key, value)) == (key, value)


def test_records_written_by_kafka_0_9_round_trip_byte_exact():
    for key, value in ((KAFKA_09_GROUP_KEY, KAFKA_09_GROUP_VALUE), (KAFKA_09_OFFSET_KEY, KAFKA_09_OFFSET_VALUE)):
        pair = (bytes.fromhex(key), bytes.fromhex(value))
        assert encode_record(decode_record(*pair)) == pair
    record = decode_record(bytes.fromhex(KAFKA_09_GROUP_KEY), bytes.fromhex(KAFKA_09_GROUP_VALUE))
    assert [m["rebalance_timeout"] for m in record["members"]] == [6_000, 6_000]  # the session timeout
    assert record["members"][0]["assignment"] == {
        "partitions": [["data", 0], ["data", 1], ["data", 2]],
        "user_data": "",
        "version": 0,
    }


def test_record_identity_is_the_key_bytes_as_a_tuple():
    """One identity exactly when record_key gives the same bytes, over every record type and key version."""
    records = [
        {"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 0},
        {"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 0, "key_version": 0},
        {"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 1},
        {"type": "offset_commit", "group_id": "g", "topic": "u", "partition": 0},
        {"type": "offset_commit", "group_id": "h", "topic": "t", "partition": 0, "tombstone": True},
        {"type": "group_metadata", "group_id": "g"},
        {"type": "group_metadata", "group_id": "g", "key_version": 1, "tombstone": True},
        {"type": "group_metadata", "group_id": "h"},
        {"type": "consumer_group_metadata", "group_id": "g"},
        {"type": "consumer_group_member_metadata", "group_id": "g", "member_id": "m"},
        {"type": "consumer_group_member_metadata", "groupId": "g", "memberId": "m"},
        {"type": "consumer_group_member_metadata", "group_id": "g", "member_id": "n"},
        {"type": "consumer_group_current_member_assignment", "group_id": "g", "member_id": "m"},
        {"type": "consumer_group_regular_expression", "group_id": "g", "regular_expression": "t.*"},
    ]
    for a in records:
        for b in records:
            assert (record_identity(a) == record_identity(b)) == (record_key(a) == record_key(b)), (a, b)
    with pytest.raises(ValueError):
        record_identity({"type": "state_change", "group_id": "g"})


def test_a_newer_consumer_protocol_version_reads_with_the_newest_layout_we_know():
    """ConsumerProtocolTest.deserializeFutureSubscriptionVersion / deserializeFutureAssignmentVersion: a version
    above 3 (here 100, with a field after the v3 ones) reads as v3 and the rest is ignored; inside a group record
    the member keeps its subscription and assignment, and the record writes back byte for byte."""
    subscription = (
        _i16(100)
        + _arr([_str("topic")])
        + _bytes(b"")
        + _arr([_str("topic") + _arr([_i32(1)])])
        + _i32(10)
        + _str("rack")
        + _str("bar")
    )
    assignment = _i16(100) + _arr([_str("topic") + _arr([_i32(0)])]) + _bytes(b"") + _str("bar")
    assert decode_subscription(subscription) == {
        "topics": ["topic"],
        "user_data": "",
        "owned_partitions": [["topic", 1]],
        "generation": 10,
        "rack": "rack",
        "version": 3,
    }
    assert decode_assignment(assignment) == {"partitions": [["topic", 0]], "user_data": "", "version": 3}
    key, value = _i16(2) + _str("my-group"), _group_value(3, subscription, assignment)
    member = decode_record(key, value)["members"][0]
    assert member["subscription"]["topics"] == ["topic"] and member["assignment"]["partitions"] == [["topic", 0]]
    assert encode_record(decode_record(key, value)) == (key, value)
    with pytest.raises(CodecError):  # a version below the lowest is still an error, as in Kafka
        decode_subscription(_i16(-1) + subscription[2:])


def test_flexible_values_keep_tagged_fields_of_a_newer_schema():
    """GroupMetadataManagerTest.testDeserializeFutureOffsetCommitValue / testDeserializeFutureGroupMetadataValue: an
    OffsetCommitValue or GroupMetadataValue v4 carrying tagged fields this schema does not know (on the value and on a
    member) reads with its known fields intact, keeps the unknown ones, and writes back byte for byte."""
    key = _i16(1) + _str("g") + _str("t") + _i32(0)
    value = (
        _i16(4)
        + _i64(42)
        + _i32(5)
        + _cstr("meta")
        + _i64(TS)
        + _uv(2)
        + _uv(7)
        + _uv(2)
        + b"\xab\xcd"
        + _uv(9)
        + _uv(1)
        + b"\x01"
    )  # tags 7 and 9, unknown
    record = decode_record(key, value)
    assert (record["offset"], record["leader_epoch"], record["metadata"], record["commit_timestamp"]) == (
        42,
        5,
        "meta",
        TS,
    )
    assert encode_record(record) == (key, value)
    gkey = _i16(2) + _str("g")
    member = (
        _cstr("m1")
        + _cstr(None)
        + _cstr("c1")
        + _cstr("/10.0.0.1")
        + _i32(300_000)
        + _i32(45_000)
        + _cbytes(_subscription(0))
        + _cbytes(b"")
        + _uv(1)
        + _uv(5)
        + _uv(1)
        + b"\x00"
    )
    gvalue = (
        _i16(4)
        + _cstr("consumer")
        + _i32(1)
        + _cstr("range")
        + _cstr("m1")
        + _i64(TS)
        + _carr([member])
        + _uv(1)
        + _uv(3)
        + _uv(2)
        + b"\x12\x34"
    )
    group = decode_record(gkey, gvalue)
    assert (group["generation"], group["leader"], [m["member_id"] for m in group["members"]]) == (1, "m1", ["m1"])
    assert encode_record(group) == (gkey, gvalue)
