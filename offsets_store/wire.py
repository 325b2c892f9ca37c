"""One generic encoder/decoder for the schemas in ``schemas.py`` (Kafka's protocol primitives, big-endian).

Flexible versions follow Kafka's generated message classes: compact lengths (unsigned varint of length + 1, 0 =
null) and, after every struct, a tagged-field section (varint count, then per field varint tag, varint size, body).
A known tagged field is written only when it differs from its default, in ascending tag order; tagged fields the
schema does not know are kept, as ``[[tag, bytes], ...]`` under ``UNKNOWN_TAGS`` in the decoded struct, and written
back between the known ones by tag (Kafka's ``RawTaggedFieldWriter``), so a round trip keeps them byte for byte.
"""

from __future__ import annotations

import base64
import struct
import uuid as uuid_module
from typing import Any

from offsets_store.schemas import REQUIRED, Struct

UNKNOWN_TAGS = "_unknownTaggedFields"


class CodecError(ValueError):
    """Bytes that are not a valid record of the expected schema. The only exception decoding raises."""


_INT = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def uuid_bytes(v: Any) -> bytes:
    """Kafka's ``Uuid`` as its 16 bytes, from its string form (URL-safe base64 without padding, what
    ``Uuid.toString()`` prints), a hyphenated UUID string, a ``uuid.UUID`` or 16 bytes."""
    if isinstance(v, uuid_module.UUID):
        return v.bytes
    if isinstance(v, (bytes, bytearray)):
        if len(v) != 16:
            raise ValueError(f"a uuid is 16 bytes, not {len(v)}")
        return bytes(v)
    if isinstance(v, str):
        if len(v) == 22:
            try:
                data = base64.urlsafe_b64decode(v + "==")
            except ValueError:
                data = b""
            if len(data) == 16 and uuid_string(data) == v:
                return data
        elif len(v) == 36:
            return uuid_module.UUID(v).bytes
    raise ValueError(f"not a Kafka Uuid: {v!r}")


def uuid_string(data: bytes) -> str:
    """``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


# ------------------------------------------------------------------ encoding
def encode(schema: Struct, version: int, value: dict, prefix_version: bool = True) -> bytes:
    out = bytearray()
    if prefix_version:
        out += _INT["int16"].pack(version)
    _write_struct(out, schema, version, value)
    return bytes(out)


def _write_struct(out: bytearray, schema: Struct, version: int, value: dict) -> None:
    flexible = schema.is_flexible(version)
    tagged = []
    for f in schema.fields:
        if not f.present(version):
            continue
        v = value.get(f.name, f.default)
        if v is REQUIRED:
            raise ValueError(f"{schema.name} needs a value for {f.name}")
        if f.tag is None:
            _write(out, f.type, v, flexible, version, f.name)
        elif not flexible:
            raise AssertionError(f"tagged field {f.name} in a non-flexible version of {schema.name}")
        elif not _is_default(v, f.default):  # Kafka writes a tagged field only when it is not its default
            body = bytearray()
            _write(body, f.type, v, True, version, f.name, tagged=True)
            tagged.append((f.tag, bytes(body)))
    if flexible:
        _write_tags(out, sorted(tagged), value.get(UNKNOWN_TAGS) or (), schema.name)


def _is_default(v: Any, default: Any) -> bool:
    if default is None or v is None:
        return v is default
    if isinstance(default, (tuple, list)):
        return isinstance(v, (tuple, list)) and list(v) == list(default)
    return v == default


def _write_tags(out: bytearray, known: list[tuple[int, bytes]], raw, name: str) -> None:
    """The tagged-field section: known fields by tag, the unknown ones read with the struct slotted in between
    (they must be ascending and must not reuse a known tag: Kafka refuses to write them otherwise)."""
    raw = [(int(tag), bytes(data)) for tag, data in raw]
    known_tags = {tag for tag, _ in known}
    for (a, _), (b, _) in zip(raw, raw[1:]):
        if b <= a:
            raise ValueError(f"{name}: unknown tagged fields must have ascending tags ({a} then {b})")
    for tag, _ in raw:
        if tag in known_tags or tag < 0:
            raise ValueError(f"{name}: unknown tagged field {tag} clashes with a known tag")
    fields = sorted(known + raw, key=lambda f: f[0])
    _uvarint(out, len(fields))
    for tag, body in fields:
        _uvarint(out, tag)
        _uvarint(out, len(body))
        out += body


def _write(out: bytearray, kind, v: Any, flexible: bool, version: int, name: str = "", tagged: bool = False) -> None:
    if isinstance(kind, tuple):
        form, elem = kind
        if form in ("struct", "nullable_struct"):
            if v is None:
                if form == "struct":
                    raise ValueError(f"a non-nullable struct field {name} is None")
                out += b"\x00" if tagged else _INT["int8"].pack(-1)
                return
            if form == "nullable_struct":  # presence marker: a varint 1 when tagged, else an int8 1
                out += b"\x01"
            _write_struct(out, elem, version, v)
            return
        if v is None:
            if form == "array":
                raise ValueError(f"a non-nullable array field {name} is None")
            _length(out, -1, flexible, compact_array=True)
            return
        items = list(v)
        _length(out, len(items), flexible, compact_array=True)
        for item in items:
            if isinstance(elem, Struct):
                _write_struct(out, elem, version, item)
            else:
                _write(out, elem, item, flexible, version, name)
        return
    if kind == "uuid":
        out += uuid_bytes(v)
    elif kind in _INT:
        out += _INT[kind].pack(int(v))
    elif kind in ("string", "nullable_string"):
        if v is None:
            if kind == "string":
                raise ValueError("a non-nullable string field is None")
            _length(out, -1, flexible, short=True)
        else:
            data = v.encode("utf-8")
            if len(data) > 0x7FFF:  # Kafka's limit for every string, compact or not (Short.MAX_VALUE)
                raise ValueError(f"string of {len(data)} UTF-8 bytes is longer than Kafka's 32767")
            _length(out, len(data), flexible, short=True)
            out += data
    elif kind in ("bytes", "nullable_bytes"):
        if v is None:
            if kind == "bytes":
                raise ValueError("a non-nullable bytes field is None")
            _length(out, -1, flexible)
        else:
            _length(out, len(v), flexible)
            out += v
    else:
        raise AssertionError(kind)


def _length(out: bytearray, n: int, flexible: bool, short: bool = False, compact_array: bool = False) -> None:
    if flexible:
        _uvarint(out, n + 1)  # compact: length + 1, 0 = null
    elif short:
        out += _INT["int16"].pack(n)
    else:
        out += _INT["int32"].pack(n)


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


# ------------------------------------------------------------------ decoding
class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError(f"truncated: wanted {n} bytes at offset {self.pos} of {len(self.data)}")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def int(self, kind: str) -> int:
        s = _INT[kind]
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if shift > 28:
                raise CodecError("varint too long")
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CodecError(f"{len(self.data) - self.pos} unexpected trailing bytes")


def decode(
    schema: Struct, data: bytes, prefix_version: bool = True, version: int | None = None, newer_as_newest: bool = False
) -> tuple[int, dict]:
    """``newer_as_newest``: a version above the schema's is read with its newest layout and what follows is ignored
    (the version returned is the newest known), as Kafka's ConsumerProtocol reads embedded subscriptions."""
    reader = Reader(data)
    if prefix_version:
        version = reader.int("int16")
    lo, hi = schema.versions
    if newer_as_newest and version > hi:
        return hi, _read_struct(reader, schema, hi)
    if not lo <= version <= hi:
        raise CodecError(f"{schema.name} version {version} is not one of {lo}..{hi}")
    value = _read_struct(reader, schema, version)
    reader.done()
    return version, value


def _read_struct(r: Reader, schema: Struct, version: int) -> dict:
    flexible = schema.is_flexible(version)
    value = {}
    tagged = {}
    for f in schema.fields:
        if f.present(version) and f.tag is None:
            value[f.name] = _read(r, f.type, flexible, version, f.name)
        else:
            value[f.name] = f.default
            if f.tag is not None and f.present(version) and flexible:
                tagged[f.tag] = f
    if flexible:
        unknown = []
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            f = tagged.get(tag)
            if f is None:  # a field of a newer schema: kept as bytes, written back as it was (like Kafka)
                unknown.append([tag, r.take(size)])
                continue
            end = r.pos + size
            if end > len(r.data):
                raise CodecError(f"truncated: tagged field {f.name} claims {size} bytes")
            value[f.name] = _read(r, f.type, True, version, f.name, tagged=True)
            if r.pos != end:
                raise CodecError(f"tagged field {f.name} is {size} bytes but its value took {r.pos - end + size}")
        if unknown:
            value[UNKNOWN_TAGS] = unknown
    return value


def _read_length(r: Reader, flexible: bool, short: bool = False) -> int:
    if flexible:
        return r.uvarint() - 1
    return r.int("int16" if short else "int32")


def _read(r: Reader, kind, flexible: bool, version: int, name: str, tagged: bool = False) -> Any:
    if isinstance(kind, tuple):
        form = kind[0]
        if form in ("struct", "nullable_struct"):
            if form == "nullable_struct":
                # Kafka's generated readers: a tagged nullable struct starts with a varint (0 = null), an untagged
                # one with an int8 (negative = null).
                if (r.uvarint() == 0) if tagged else (r.int("int8") < 0):
                    return None
            return _read_struct(r, kind[1], version)
        n = _read_length(r, flexible)
        if n < 0:
            if form == "array":
                raise CodecError(f"null in non-nullable array {name}")
            return None
        if n > len(r.data) - r.pos:  # every element takes at least a byte: refuse absurd counts early
            raise CodecError(f"array {name} claims {n} elements in {len(r.data) - r.pos} bytes")
        elem = kind[1]
        if isinstance(elem, Struct):
            return [_read_struct(r, elem, version) for _ in range(n)]
        return [_read(r, elem, flexible, version, name) for _ in range(n)]
    if kind in _INT:
        return r.int(kind)
    if kind == "uuid":
        return uuid_string(r.take(16))
    if kind in ("string", "nullable_string"):
        n = _read_length(r, flexible, short=True)
        if n < 0:
            if kind == "string":
                raise CodecError(f"null in non-nullable string {name}")
            return None
        try:
            return r.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError(f"string {name} is not UTF-8") from None
    n = _read_length(r, flexible)
    if n < 0:
        if kind == "bytes":
            raise CodecError(f"null in non-nullable bytes {name}")
        return None
    return r.take(n)
