"""Every version of every schema round-trips through the one generic encoder/decoder, and the embedded consumer
protocol decoders never raise anything but CodecError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsets_store import CodecError
from offsets_store import schemas as s
from offsets_store.codec import decode_assignment, decode_subscription
from offsets_store.wire import UNKNOWN_TAGS, decode, encode, uuid_string

_PRIMITIVES = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "uuid": st.binary(min_size=16, max_size=16).map(uuid_string),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "string": st.text(max_size=12),
    "nullable_string": st.none() | st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "nullable_bytes": st.none() | st.binary(max_size=12),
}


def values(schema: s.Struct, version: int) -> st.SearchStrategy[dict]:
    """Random values for the fields a version has; the others must decode to their defaults."""
    fields = {}
    for f in schema.fields:
        if not f.present(version):
            fields[f.name] = st.just(f.default)
        elif isinstance(f.type, tuple):
            form, elem = f.type
            inner = values(elem, version) if isinstance(elem, s.Struct) else _PRIMITIVES[elem]
            strategy = inner if form.endswith("struct") else st.lists(inner, max_size=3)
            fields[f.name] = st.none() | strategy if form.startswith("nullable") else strategy
        else:
            fields[f.name] = _PRIMITIVES[f.type]
    return st.fixed_dictionaries(fields)


def normalised(value):
    """Decoded arrays are lists and absent array fields keep their default; compare structurally."""
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalised(v) for v in value]
    return value


KIP848_SCHEMAS = tuple(schema for record_type in (3, 4, 5, 6, 7, 8, 16) for schema in s.RECORD_TYPES[record_type])
CASES = [
    (schema, v)
    for schema in (
        s.OFFSET_COMMIT_KEY,
        s.GROUP_METADATA_KEY,
        s.OFFSET_COMMIT_VALUE,
        s.GROUP_METADATA_VALUE,
        s.CONSUMER_PROTOCOL_SUBSCRIPTION,
        s.CONSUMER_PROTOCOL_ASSIGNMENT,
    )
    + KIP848_SCHEMAS
    for v in range(schema.versions[0], schema.versions[1] + 1)
]


@pytest.mark.parametrize("schema,version", CASES, ids=[f"{c[0].name}-v{c[1]}" for c in CASES])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_version_round_trips(schema, version, data):
    value = data.draw(values(schema, version))
    encoded = encode(schema, version, value)
    assert encoded[:2] == version.to_bytes(2, "big")
    got_version, decoded = decode(schema, encoded)
    assert got_version == version and normalised(decoded) == normalised(value)
    assert encode(schema, version, decoded) == encoded


def test_flexible_versions_use_compact_lengths_and_tagged_fields():
    # v3 writes metadata "" as int16 0; v4 writes it as varint 1 (length + 1) and ends with an empty tag section.
    v3 = encode(s.OFFSET_COMMIT_VALUE, 3, {"offset": 1, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 2})
    v4 = encode(s.OFFSET_COMMIT_VALUE, 4, {"offset": 1, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 2})
    assert len(v3) == 2 + 8 + 4 + 2 + 8 and len(v4) == 2 + 8 + 4 + 1 + 8 + 1 and v4[-1] == 0
    # A flexible group value: the nested members are flexible too (compact bytes, their own tag sections).
    member = {
        "memberId": "m",
        "groupInstanceId": None,
        "clientId": "c",
        "clientHost": "h",
        "rebalanceTimeout": 1,
        "sessionTimeout": 2,
        "subscription": b"",
        "assignment": b"\x01",
    }
    value = encode(
        s.GROUP_METADATA_VALUE,
        4,
        {
            "protocolType": "consumer",
            "generation": 1,
            "protocol": "range",
            "leader": "m",
            "currentStateTimestamp": 5,
            "members": [member],
        },
    )
    assert value.endswith(
        b"\x02m\x00\x02c\x02h" + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x01\x02\x01\x00\x00"
    )


def test_unknown_tagged_fields_are_kept_apart_and_written_back():
    v4 = encode(s.OFFSET_COMMIT_VALUE, 4, {"offset": 1, "leaderEpoch": 0, "metadata": "x", "commitTimestamp": 2})
    with_tags = v4[:-1] + bytes([2, 1, 1, 0xAA, 7, 2, 0xBB, 0xCC])  # two unknown tagged fields: tag 1 (1 byte), tag 7
    version, value = decode(s.OFFSET_COMMIT_VALUE, with_tags)
    assert value.pop(UNKNOWN_TAGS) == [[1, b"\xaa"], [7, b"\xbb\xcc"]]
    assert (version, value) == decode(s.OFFSET_COMMIT_VALUE, v4)
    assert encode(s.OFFSET_COMMIT_VALUE, 4, {**value, UNKNOWN_TAGS: [[1, b"\xaa"], [7, b"\xbb\xcc"]]}) == with_tags


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=100))
def test_embedded_protocol_decoders_raise_only_codec_error(data):
    for decoder in (decode_subscription, decode_assignment):
        try:
            decoder(data)
        except CodecError:
            pass
