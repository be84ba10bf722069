"""Turning Python values (tensors, arrays, data frame cells, dataclasses…) into JSON text.

Optional libraries are recognised by duck typing and module names, never imported: numpy,
pandas, torch and datasets are used only when the caller hands over their objects.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import math
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

MAX_METADATA_KEYS = 256
MAX_METADATA_KEY_CHARS = 128
MAX_METADATA_BYTES = 64 * 1024
RESERVED_PREFIX = "touchstone."

# One encoder for every call: json.dumps with arguments builds a new encoder each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _unknown(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _c_encoder() -> Callable[[Any], str] | None:
    """The C encoder itself, made once; None where this Python has none.

    JSONEncoder.encode builds one per call (a third of the cost of a small dict). Cycles are not
    tracked: the C encoder's RecursionError sends such a value down the converting path, which
    cuts it.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return None
    try:
        encoder = make(None, _unknown, basestring, None, ":", ",", False, False, False)

        def encode(value: Any) -> str:
            if isinstance(value, str):
                return str(basestring(value))
            return "".join(encoder(value, 0))

        sample = {"a": [1, 2.5, "é\n", None, True], "b": {"c": -3}}
        if encode(sample) != _ENCODER.encode(sample):
            return None
    except Exception:
        return None
    return encode


_encode: Callable[[Any], str] = _c_encoder() or _ENCODER.encode

# Deep enough for real payloads; cyclic or absurdly deep values are cut instead of recursing on.
_MAX_DEPTH = 64


def _non_finite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def to_json_value(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value``.

    Tensors are detached and moved to the CPU before ``tolist()``; numpy and other scalars with
    ``item()`` become Python numbers; non-finite floats become the text ``NaN``, ``Infinity``,
    ``-Infinity``; dates become ISO 8601 text; bytes become base64 text; anything else unknown
    becomes its ``str()``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if depth >= _MAX_DEPTH:
        return "…[nested too deep]"
    if isinstance(value, Mapping):
        return {_key(k): to_json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_value(v, depth + 1) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and type(value).__name__ == "DataFrame":
        return to_json_value(to_dict(orient="records"), depth + 1)
    tensor = _tensor_list(value)
    if tensor is not _MISSING:
        return to_json_value(tensor, depth + 1)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return to_json_value(float(value), depth + 1)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_json_value(value.value, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_value(dataclasses.asdict(value), depth + 1)
    dump = getattr(value, "model_dump", None)  # pydantic v2 models
    if callable(dump):
        return to_json_value(dump(mode="json"), depth + 1)
    item = getattr(value, "item", None)  # numpy / torch scalars, pandas scalars
    if callable(item) and _is_array_like_scalar(value):
        return to_json_value(item(), depth + 1)
    isoformat = getattr(value, "isoformat", None)  # pandas Timestamp subclasses datetime; others
    if callable(isoformat):
        return str(isoformat())
    if _is_missing_marker(value):
        return None
    return str(value)


class _Missing:
    pass


_MISSING: Any = _Missing()


def _tensor_list(value: Any) -> Any:
    """``tolist()`` of a tensor or array (detached and on the CPU first), else _MISSING."""
    tolist = getattr(value, "tolist", None)
    if not callable(tolist):
        return _MISSING
    detach = getattr(value, "detach", None)
    if callable(detach):
        value = detach()
    cpu = getattr(value, "cpu", None)
    if callable(cpu):
        value = cpu()
    return value.tolist()


def _is_array_like_scalar(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.split(".", 1)[0] in ("numpy", "torch", "pandas", "jax", "tensorflow")


def _is_missing_marker(value: Any) -> bool:
    """Pandas' NA and NaT: missing values, sent as null."""
    return type(value).__name__ in ("NAType", "NaTType")


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(to_json_value(key))


def json_text(value: Any) -> str:
    """JSON text of any value (see to_json_value); plain JSON values take the C encoder alone."""
    try:
        return _encode(value)
    except (TypeError, ValueError, RecursionError):
        return _encode(to_json_value(value))


def metadata_text(metadata: Any) -> str | None:
    """JSON text of a metadata mapping after checking the limits; None when nothing is left.

    Keys starting ``touchstone.`` are reserved and dropped. Raises ValueError naming the limit
    that was passed: 256 keys, 128 characters per key, 64 KiB in total (UTF-8 JSON).
    """
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping of str keys, not {type(metadata).__name__}")
    # Usual case first: a few plain keys, encoded as given without a copy.
    kept: Mapping[str, Any] = metadata
    for key in metadata:
        if (
            key.__class__ is not str
            or len(key) > MAX_METADATA_KEY_CHARS
            or key.startswith(RESERVED_PREFIX)
        ):
            kept = _checked_keys(metadata)
            break
    if not kept:
        return None
    if len(kept) > MAX_METADATA_KEYS:
        raise ValueError(
            f"metadata has {len(kept)} keys; the limit is {MAX_METADATA_KEYS} keys per record"
        )
    text = json_text(kept)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES} bytes (64 KiB) "
            "per record"
        )
    return text


def _checked_keys(metadata: Mapping[Any, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise ValueError(f"metadata keys must be str; got a {type(key).__name__} key")
        if key.startswith(RESERVED_PREFIX):
            continue
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise ValueError(
                f"metadata key of {len(key)} characters exceeds the limit of "
                f"{MAX_METADATA_KEY_CHARS} characters per key (key starts {key[:32]!r})"
            )
        kept[key] = value
    return kept


def check_trace_id(trace_id: Any) -> str:
    """The trace id itself when it is 32 lowercase hex characters and not all zeros."""
    if (
        not isinstance(trace_id, str)
        or len(trace_id) != 32
        or trace_id.strip("0123456789abcdef") != ""
        or trace_id == "0" * 32
    ):
        shown = repr(trace_id) if isinstance(trace_id, str) and len(trace_id) <= 64 else "value"
        raise ValueError(
            f"trace_id must be a nonzero 32-character lowercase hexadecimal id; got {shown}"
        )
    return trace_id


def label_text(key: Any, value: Any) -> str:
    """A label value as text; labels are flat strings (numbers and booleans are converted)."""
    if not isinstance(key, str) or not key:
        raise ValueError("label keys must be non-empty str")
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"label {key!r} must be finite; got {value!r}")
        return str(value)
    raise ValueError(f"label {key!r} must be a str, number or bool; got {type(value).__name__}")
