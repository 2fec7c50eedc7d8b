"""The protobuf wire format of OTLP, written by hand: no message objects, no per-attribute SDK objects.

Only what the three export requests need (``opentelemetry-proto`` common, resource, logs, trace, metrics):
varints, fixed 32/64-bit numbers, length-delimited fields. Fields are written in field-number order and
proto3 defaults (0, "", empty) are left out, as protobuf's own serialiser does, so the bytes are the same
as the SDK exporters' (``tests/test_otlp_wire.py`` proves it on fixture entries).

:class:`KeyValues` memoises the encoding of one attribute (key and value): an entry's attributes repeat
from entry to entry (agent, model, session, tool names), so most cost one dictionary look-up. The memo
is bounded; it is cleared when it grows past ``max_items``.

A value protobuf cannot carry (an int outside int64, a negative or too large fixed64 time, a string that
is not valid UTF-8) raises :class:`Unencodable`: the caller treats that entry as poison, a permanent error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_PACK_Q = struct.Struct("<Q").pack
_PACK_D = struct.Struct("<d").pack
_PACK_I = struct.Struct("<I").pack
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1


class Unencodable(ValueError):  # noqa: N818 - a kind of ValueError, named for what it says
    """A value that OTLP's protobuf cannot carry."""


_SMALL = [bytes((i,)) for i in range(0x80)]


def varint(value: int) -> bytes:
    """An unsigned varint; a negative int64 as its 10-byte two's complement (protobuf's int64)."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint((field << 3) | wire)


_LD_TAGS = [tag(n, 2) for n in range(32)]


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, sub-message)."""
    n = len(payload)
    return _LD_TAGS[field] + (_SMALL[n] if n < 0x80 else varint(n)) + payload


def fixed64(field: int, value: int) -> bytes:
    """A fixed64 field (times, counts); 0 is the default and is left out."""
    if not value:
        return b""
    if value < 0 or value > _UINT64_MAX:
        raise Unencodable(f"fixed64 out of range: {value}")
    return tag(field, 1) + _PACK_Q(value)


def fixed32(field: int, value: int) -> bytes:
    return tag(field, 5) + _PACK_I(value) if value else b""


def double(field: int, value: float) -> bytes:
    return tag(field, 1) + _PACK_D(value)


def string(field: int, value: str) -> bytes:
    """A proto3 string field; "" is the default and is left out."""
    return ld(field, utf8(value)) if value else b""


def utf8(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Unencodable(f"not valid UTF-8 ({exc.reason})") from None


def any_value(value: Any) -> bytes:
    """The body of an ``AnyValue`` (its oneof member is always written, also a zero or empty one)."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return ld(1, utf8(value))
    if isinstance(value, int):
        if value < _INT64_MIN or value > _INT64_MAX:
            raise Unencodable(f"int outside int64: {value}")
        return b"\x18" + varint(value)
    if isinstance(value, float):
        return b"\x21" + _PACK_D(value)
    if isinstance(value, bytes):
        return ld(7, value)
    if isinstance(value, list | tuple):
        return ld(5, b"".join(ld(1, any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return ld(6, b"".join(ld(1, key_value(str(k), v)) for k, v in value.items()))
    if value is None:
        return b""
    raise Unencodable(f"no OTLP value for {type(value).__name__}")


def key_value(key: str, value: Any) -> bytes:
    """The body of a ``KeyValue``."""
    return ld(1, utf8(key)) + ld(2, any_value(value))


class KeyValues:
    """Attributes as the repeated ``KeyValue`` field ``number`` of a message.

    A string or int attribute is memoised whole per (key, value), while its key has few values (agent,
    model, tool names, statuses); a key with more than ``per_key`` distinct values (ids, digests, times)
    is taken for high-cardinality and only its encoded key is memoised. ``convert`` maps a value to what
    is encoded (None: left out)."""

    def __init__(self, number: int, convert: Callable[[Any], Any] | None = None, per_key: int = 512,
                 max_keys: int = 4096) -> None:
        self.number = number
        self.convert = convert
        self.per_key = per_key
        self.max_keys = max_keys
        self._memo: dict[str, dict[str | int, bytes]] = {}  # exact str and int values only: no True == 1
        self._many: set[str] = set()
        self._keys: dict[str, bytes] = {}

    def _remember(self, key: str, value: str | int) -> bytes:
        found = self._other(key, value)
        if key in self._many:
            return found
        values = self._memo.get(key)
        if values is None:
            if len(self._memo) >= self.max_keys:
                self._memo.clear()
            values = self._memo[key] = {}
        if len(values) >= self.per_key:
            self._many.add(key)
            del self._memo[key]
        else:
            values[value] = found
        return found

    def _other(self, key: str, value: Any) -> bytes:
        prefix = self._keys.get(key)
        if prefix is None:
            if len(self._keys) >= self.max_keys:
                self._keys.clear()
            prefix = self._keys[key] = ld(1, utf8(key))
        if value.__class__ is str:  # the common case written out: AnyValue{1: string} in KeyValue{2: ...}
            raw = utf8(value)
            n = len(raw)
            body = (_SMALL[n] if n < 0x80 else varint(n)) + raw
            n = len(body) + 1
            kv = prefix + b"\x12" + (_SMALL[n] if n < 0x80 else varint(n)) + b"\x0a" + body
        else:
            kv = prefix + ld(2, any_value(value))
        n = len(kv)
        return _LD_TAGS[self.number] + (_SMALL[n] if n < 0x80 else varint(n)) + kv

    def fields(self, attributes: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> bytes:
        memo = self._memo
        convert = self.convert
        out = []
        for key, value in attributes.items():
            if key in skip:
                continue
            cls = value.__class__
            if cls is not str and cls is not int and convert is not None:
                value = convert(value)
                if value is None:
                    continue
                cls = value.__class__
            if cls is str or cls is int:
                values = memo.get(key)
                found = values.get(value) if values is not None else None
                out.append(found if found is not None else self._remember(key, value))
            else:
                out.append(self._other(key, value))
        return b"".join(out)


def resource(attributes: Mapping[str, Any]) -> bytes:
    """The body of a ``Resource``."""
    return b"".join(ld(1, key_value(k, v)) for k, v in attributes.items())


def scope(name: str, version: str) -> bytes:
    """The body of an ``InstrumentationScope``."""
    return string(1, name) + string(2, version)


def request(groups: Iterable[tuple[bytes, bytes, list[bytes]]]) -> bytes:
    """An ``Export{Logs,Trace,Metrics}ServiceRequest``: per (resource, scope), the encoded items.

    All three share the shape request{1: Resource*{1: resource, 2: Scope*{1: scope, 2: item*}}}.
    """
    out = []
    for resource_body, scope_body, items in groups:
        scoped = ld(1, scope_body) + b"".join([ld(2, item) for item in items])
        out.append(ld(1, ld(1, resource_body) + ld(2, scoped)))
    return b"".join(out)
