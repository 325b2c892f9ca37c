"""One generic encoder/decoder for the schemas in ``schemas.py`` (Kafka's protocol primitives, big-endian)."""
from __future__ import annotations

import struct
from typing import Any

from offsets_store.schemas import Struct


class CodecError(ValueError):
    """Bytes that are not a valid record of the expected schema. The only exception decoding raises."""


_INT = {"int16": struct.Struct(">h"), "int32": struct.Struct(">i"), "int64": struct.Struct(">q")}


# ------------------------------------------------------------------ encoding
def encode(schema: Struct, version: int, value: dict, prefix_version: bool = True) -> bytes:
    out = bytearray()
    if prefix_version:
        out += _INT["int16"].pack(version)
    _write_struct(out, schema, version, value)
    return bytes(out)


def _write_struct(out: bytearray, schema: Struct, version: int, value: dict) -> None:
    flexible = schema.is_flexible(version)
    for f in schema.fields:
        if f.present(version):
            _write(out, f.type, value.get(f.name, f.default), flexible, version)
    if flexible:
        _uvarint(out, 0)   # no tagged fields


def _write(out: bytearray, kind, v: Any, flexible: bool, version: int) -> None:
    if isinstance(kind, tuple):
        elem = kind[1]
        if v is None:
            _length(out, -1, flexible, compact_array=True)
            return
        items = list(v)
        _length(out, len(items), flexible, compact_array=True)
        for item in items:
            if isinstance(elem, Struct):
                _write_struct(out, elem, version, item)
            else:
                _write(out, elem, item, flexible, version)
        return
    if kind in _INT:
        out += _INT[kind].pack(int(v))
    elif kind in ("string", "nullable_string"):
        if v is None:
            if kind == "string":
                raise ValueError("a non-nullable string field is None")
            _length(out, -1, flexible, short=True)
        else:
            data = v.encode("utf-8")
            if len(data) > 0x7FFF:   # Kafka's limit for every string, compact or not (Short.MAX_VALUE)
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
        _uvarint(out, n + 1)   # compact: length + 1, 0 = null
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
        chunk = bytes(self.data[self.pos:self.pos + n])
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


def decode(schema: Struct, data: bytes, prefix_version: bool = True, version: int | None = None) -> tuple[int, dict]:
    reader = Reader(data)
    if prefix_version:
        version = reader.int("int16")
    lo, hi = schema.versions
    if not lo <= version <= hi:
        raise CodecError(f"{schema.name} version {version} is not one of {lo}..{hi}")
    value = _read_struct(reader, schema, version)
    reader.done()
    return version, value


def _read_struct(r: Reader, schema: Struct, version: int) -> dict:
    flexible = schema.is_flexible(version)
    value = {}
    for f in schema.fields:
        value[f.name] = _read(r, f.type, flexible, version, f.name) if f.present(version) else f.default
    if flexible:
        for _ in range(r.uvarint()):      # tagged fields we do not know: skip them
            r.uvarint()
            r.take(r.uvarint())
    return value


def _read_length(r: Reader, flexible: bool, short: bool = False) -> int:
    if flexible:
        return r.uvarint() - 1
    return r.int("int16" if short else "int32")


def _read(r: Reader, kind, flexible: bool, version: int, name: str) -> Any:
    if isinstance(kind, tuple):
        n = _read_length(r, flexible)
        if n < 0:
            return None
        if n > len(r.data) - r.pos:   # every element takes at least a byte: refuse absurd counts early
            raise CodecError(f"array {name} claims {n} elements in {len(r.data) - r.pos} bytes")
        elem = kind[1]
        if isinstance(elem, Struct):
            return [_read_struct(r, elem, version) for _ in range(n)]
        return [_read(r, elem, flexible, version, name) for _ in range(n)]
    if kind in _INT:
        return r.int(kind)
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
