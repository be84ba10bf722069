"""Rows for log_batch and evaluate.

Lists of dicts, pandas DataFrames, Hugging Face datasets, or any iterable of mappings. The
libraries are recognised by their objects, never imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


def _is_pandas_frame(rows: Any) -> bool:
    module = type(rows).__module__ or ""
    return module.startswith("pandas") and callable(getattr(rows, "to_dict", None))


def _is_hf_dataset(rows: Any) -> bool:
    module = type(rows).__module__ or ""
    return module.startswith("datasets") and hasattr(rows, "column_names")


def _is_missing(value: Any) -> bool:
    """A data frame cell that means "no value": None, NaN, pandas NA or NaT."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def iter_rows(rows: Any) -> Iterator[Mapping[str, Any]]:
    """Each row as a mapping; data frame cells holding a missing value are left out of the row."""
    if isinstance(rows, Mapping):
        raise TypeError("log_batch takes a collection of rows (dicts), not a single dict")
    if isinstance(rows, (str, bytes)):
        raise TypeError("log_batch takes a collection of rows (dicts), not a string")
    if _is_pandas_frame(rows):
        for row in rows.to_dict(orient="records"):
            yield {k: v for k, v in row.items() if not _is_missing(v)}
        return
    if _is_hf_dataset(rows):
        # Arrow-backed datasets yield plain dicts of Python values (unless a format is set).
        for row in rows:
            yield {k: v for k, v in row.items() if not _is_missing(v)}
        return
    if not isinstance(rows, Iterable):
        raise TypeError(
            "log_batch accepts a list of dicts, a pandas DataFrame, a Hugging Face Dataset or an "
            f"iterable of mappings; got {type(rows).__name__}"
        )
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i} is a {type(row).__name__}, not a mapping")
        yield row
