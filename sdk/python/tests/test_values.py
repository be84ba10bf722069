"""Serialization without a server: values, limits, the protobuf written, answers read."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import uuid
from decimal import Decimal
from typing import Any

import pytest

from touchstone import _otlp
from touchstone._http import retry_after_seconds
from touchstone._values import check_trace_id, json_text, metadata_text, to_json_value

from .conftest import run_python


def test_importing_the_sdk_loads_no_optional_library() -> None:
    run = run_python(
        "import sys, touchstone\n"
        "print([m for m in ('numpy', 'pandas', 'torch', 'datasets') if m in sys.modules])",
        {},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_values_become_json() -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    value = {
        "nan": math.nan,
        "inf": -math.inf,
        "array": np.arange(3),
        "matrix": np.ones((2, 2), dtype=np.float32),
        "scalar": np.int32(5),
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "stamp": pd.Timestamp("2026-01-02T03:04:05Z"),
        "missing": pd.NA,
        "money": Decimal("1.25"),
        "id": uuid.UUID(int=1),
        "raw": b"\x00\x01",
        "point": Point(1, math.nan),
        "tuple": (1, "a"),
        7: "int key",
        "frame": pd.DataFrame({"a": [1, 2]}),
    }
    out = json.loads(json_text(value))
    assert out["nan"] == "NaN"
    assert out["inf"] == "-Infinity"
    assert out["array"] == [0, 1, 2]
    assert out["matrix"] == [[1.0, 1.0], [1.0, 1.0]]
    assert out["scalar"] == 5
    assert out["when"] == "2026-01-02T03:04:05+00:00"
    assert out["stamp"] == "2026-01-02T03:04:05+00:00"
    assert out["missing"] is None
    assert out["money"] == 1.25
    assert out["id"] == "00000000-0000-0000-0000-000000000001"
    assert out["raw"] == "AAE="
    assert out["point"] == {"x": 1, "y": "NaN"}
    assert out["tuple"] == [1, "a"]
    assert out["7"] == "int key"
    assert out["frame"] == [{"a": 1}, {"a": 2}]


def test_cyclic_values_are_cut_not_recursed_forever() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert "nested too deep" in json_text(loop)


def test_metadata_limits_and_reserved_keys() -> None:
    assert metadata_text({"touchstone.only": 1}) is None
    assert json.loads(metadata_text({"a": 1, "touchstone.x": 2}) or "") == {"a": 1}
    with pytest.raises(ValueError, match="limit is 256 keys"):
        metadata_text({str(i): i for i in range(257)})
    metadata_text({str(i): i for i in range(256)})
    with pytest.raises(ValueError, match="128 characters"):
        metadata_text({"x" * 129: 1})
    metadata_text({"x" * 128: 1})
    with pytest.raises(ValueError, match="64 KiB"):
        metadata_text({"v": "é" * 33_000})  # 66 000 bytes as UTF-8
    with pytest.raises(TypeError):
        metadata_text(["not", "a", "mapping"])


def test_trace_ids() -> None:
    good = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert check_trace_id(good) == good
    for bad in ("0" * 32, good.upper(), good[:-1], good + "0", "z" * 32, None, 5):
        with pytest.raises(ValueError, match="nonzero 32-character lowercase hexadecimal"):
            check_trace_id(bad)


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    return list(_otlp._fields(buf))


def test_the_request_is_valid_otlp_protobuf() -> None:
    template = _otlp.RequestTemplate([("service.name", "svc")], "touchstone", "1.0")
    attrs = _otlp.string_attribute(_otlp.key_prefix("touchstone.record.input"), b'"hi"')
    trace_id = bytes(range(1, 17))
    span = _otlp.span_entry(trace_id, bytes(range(1, 9)), b"log", 10, 20, attrs)
    body = template.request([span, span])
    (field, resource_spans), *rest = _fields(body)
    assert field == 1
    assert rest == []
    parts = dict(_fields(resource_spans))
    scope_spans = _fields(parts[2])
    spans = [v for f, v in scope_spans if f == 2]
    assert len(spans) == 2
    decoded = dict(_fields(spans[0]))
    assert decoded[1] == trace_id
    assert decoded[5] == b"log"
    assert decoded[6] == 1
    kv = dict(_fields(decoded[9]))
    assert kv[1] == b"touchstone.record.input"
    assert dict(_fields(kv[2]))[1] == b'"hi"'


def test_varints() -> None:
    for n in (0, 1, 127, 128, 300, 2**21, 2**35):
        encoded = _otlp.varint(n)
        assert _otlp._read_varint(encoded, 0) == (n, len(encoded))


def test_partial_success_answers_are_read_in_both_encodings() -> None:
    listed = [{"index": 2, "traceId": "ab" * 16, "spanId": "0" * 16, "reason": "zero span id"}]
    message = f"1 spans rejected: zero span id\nrejected_spans={json.dumps(listed)}"
    as_json = json.dumps({"partialSuccess": {"rejectedSpans": "1", "errorMessage": message}})
    got = _otlp.parse_export_response(as_json.encode(), "application/json")
    assert got.rejected == 1
    assert got.summary == "1 spans rejected: zero span id"
    assert got.spans == (_otlp.RejectedSpan(2, "zero span id", "ab" * 16, "0" * 16),)

    inner = b"\x08\x01" + b"\x12" + _otlp.varint(len(message.encode())) + message.encode()
    as_pb = b"\x0a" + _otlp.varint(len(inner)) + inner
    assert _otlp.parse_export_response(as_pb, "application/x-protobuf") == got
    assert _otlp.parse_export_response(b"", "application/x-protobuf").rejected == 0


def test_retry_after() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    when = retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    assert when == pytest.approx(10.0)


def test_to_json_value_leaves_plain_values_alone() -> None:
    assert to_json_value("x") == "x"
    assert to_json_value(None) is None
    assert to_json_value([1, 2.5, True]) == [1, 2.5, True]
