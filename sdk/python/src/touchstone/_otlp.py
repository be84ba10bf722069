"""OTLP/HTTP protobuf, written and read by hand: only the few messages a logged record needs.

Field numbers are those of opentelemetry-proto (trace/v1/trace.proto, common/v1/common.proto,
collector/trace/v1/trace_service.proto). Hand encoding keeps the package free of dependencies and
costs a few microseconds per record.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Touchstone's partial-success error_message lists the refused spans after this prefix (see
# docs/ingest.md): a JSON array of {index, traceId?, spanId?, reason}.
REJECTED_SPANS_PREFIX = "rejected_spans="

_SMALL_VARINTS = [bytes([i]) for i in range(128)]
_pack_u64 = struct.Struct("<Q").pack


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 128:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    return _SMALL_VARINTS[tag] + varint(len(payload)) + payload


def key_prefix(key: str) -> bytes:
    """KeyValue.key (field 1) of an attribute, computed once per attribute name."""
    return _len_field(0x0A, key.encode("utf-8"))


def string_attribute(prefix: bytes, value: bytes) -> bytes:
    """Span.attributes (field 9) entry: KeyValue{key, AnyValue{string_value}} from a key_prefix."""
    any_value = b"\x0a" + varint(len(value)) + value
    kv = prefix + b"\x12" + varint(len(any_value)) + any_value
    return b"\x4a" + varint(len(kv)) + kv


def attributes_block(attributes: Iterable[tuple[str, str]]) -> bytes:
    """Repeated KeyValue (field 1 of Resource) for string attributes."""
    out = bytearray()
    for key, value in attributes:
        any_value = _len_field(0x0A, value.encode("utf-8"))
        kv = key_prefix(key) + _len_field(0x12, any_value)
        out += _len_field(0x0A, kv)
    return bytes(out)


def span_entry(
    trace_id: bytes,
    span_id: bytes,
    name: bytes,
    start_ns: int,
    end_ns: int,
    attributes: bytes,
) -> bytes:
    """One ScopeSpans.spans (field 2) entry: a finished INTERNAL root span, length-prefixed."""
    span = (
        b"\x0a\x10"
        + trace_id
        + b"\x12\x08"
        + span_id
        + b"\x2a"
        + varint(len(name))
        + name
        + b"\x30\x01\x39"
        + _pack_u64(start_ns)
        + b"\x41"
        + _pack_u64(end_ns)
        + attributes
    )
    return b"\x12" + varint(len(span)) + span


class RequestTemplate:
    """ExportTraceServiceRequest bytes around a batch of span entries (one resource, one scope)."""

    def __init__(self, resource: Sequence[tuple[str, str]], scope_name: str, scope_version: str):
        self._resource = _len_field(0x0A, attributes_block(resource))
        scope = _len_field(0x0A, scope_name.encode()) + _len_field(0x12, scope_version.encode())
        self._scope = _len_field(0x0A, scope)

    def request(self, spans: Sequence[bytes]) -> bytes:
        """The request body holding ``spans`` (span_entry outputs) in order."""
        body = b"".join(spans)
        scope_spans = self._scope + body
        resource_spans = self._resource + _len_field(0x12, scope_spans)
        return _len_field(0x0A, resource_spans)


# ---- reading answers ---------------------------------------------------------------------------


class DecodeError(ValueError):
    """A protobuf answer that could not be read."""


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterable[tuple[int, int | bytes]]:
    pos = 0
    while pos < len(buf):
        tag, pos = _read_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            yield field, value
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            if pos + size > len(buf):
                raise DecodeError("truncated field")
            yield field, buf[pos : pos + size]
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wire}")


@dataclass(frozen=True)
class RejectedSpan:
    """A span the server refused: its position in the request and the reason."""

    index: int
    reason: str
    trace_id: str | None = None
    span_id: str | None = None


@dataclass(frozen=True)
class PartialSuccess:
    """ExportTraceServiceResponse.partial_success, with Touchstone's list of refused spans."""

    rejected: int
    message: str
    spans: tuple[RejectedSpan, ...]

    @property
    def summary(self) -> str:
        """The readable part of the message (its first line)."""
        return self.message.split("\n", 1)[0]


def parse_export_response(body: bytes, content_type: str) -> PartialSuccess:
    """Reads an ExportTraceServiceResponse (protobuf or JSON); empty means full success."""
    rejected = 0
    message = ""
    if "json" in content_type:
        data = json.loads(body or b"{}")
        partial = data.get("partialSuccess") or data.get("partial_success") or {}
        rejected = int(partial.get("rejectedSpans") or partial.get("rejected_spans") or 0)
        message = str(partial.get("errorMessage") or partial.get("error_message") or "")
    else:
        for field, value in _fields(body):
            if field == 1 and isinstance(value, bytes):
                for f, v in _fields(value):
                    if f == 1 and isinstance(v, int):
                        rejected = v
                    elif f == 2 and isinstance(v, bytes):
                        message = v.decode("utf-8", "replace")
    return PartialSuccess(rejected, message, _listed(message))


def _listed(message: str) -> tuple[RejectedSpan, ...]:
    for line in message.split("\n"):
        if not line.startswith(REJECTED_SPANS_PREFIX):
            continue
        try:
            items = json.loads(line[len(REJECTED_SPANS_PREFIX) :])
        except ValueError:
            return ()
        out = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("index"), int):
                out.append(
                    RejectedSpan(
                        index=item["index"],
                        reason=str(item.get("reason", "rejected")),
                        trace_id=item.get("traceId"),
                        span_id=item.get("spanId"),
                    )
                )
        return tuple(out)
    return ()


def parse_status_message(body: bytes, content_type: str) -> str:
    """The message of a google.rpc.Status error answer (protobuf or JSON); '' when unreadable."""
    try:
        if "json" in content_type:
            data = json.loads(body)
            if isinstance(data, dict):
                if isinstance(data.get("message"), str):
                    return str(data["message"])
                error = data.get("error")
                if isinstance(error, dict) and isinstance(error.get("message"), str):
                    return str(error["message"])
            return ""
        if "protobuf" in content_type:
            for field, value in _fields(body):
                if field == 2 and isinstance(value, bytes):
                    return value.decode("utf-8", "replace")
    except (ValueError, DecodeError):
        return ""
    return ""
