"""Touchstone logging SDK and API client.

Log what your agent saw and answered, without blocking::

    import touchstone

    touchstone.init(project="support-bot")          # or TOUCHSTONE_OTLP_ENDPOINT / _API_KEY
    future = touchstone.log("What is 2+2?", "4", {"model": "gpt-4o-mini"})
    touchstone.flush()                              # before a serverless handler returns

and call the API with :class:`Client`. The module-level functions use one default
:class:`Logger`, created by :func:`init` or on first use from the environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from ._logger import Logger
from ._version import __version__
from .client import Client
from .errors import (
    APIError,
    ConflictError,
    ExportError,
    FlushError,
    ForkedProcessError,
    InternalServerError,
    InvalidArgumentError,
    LoggerClosedError,
    LoggingError,
    NotFoundError,
    OutcomeUncertainError,
    PermissionDeniedError,
    QueueFullError,
    RecordRejectedError,
    RecordTooLargeError,
    ResourceExhaustedError,
    TouchstoneConnectionError,
    TouchstoneError,
    UnauthenticatedError,
    UnavailableError,
    WebhookSignatureError,
)
from .webhooks import verify_webhook_signature

__all__ = [
    "APIError",
    "Client",
    "ConflictError",
    "ExportError",
    "FlushError",
    "ForkedProcessError",
    "InternalServerError",
    "InvalidArgumentError",
    "Logger",
    "LoggerClosedError",
    "LoggingError",
    "NotFoundError",
    "OutcomeUncertainError",
    "PermissionDeniedError",
    "QueueFullError",
    "RecordRejectedError",
    "RecordTooLargeError",
    "ResourceExhaustedError",
    "TouchstoneConnectionError",
    "TouchstoneError",
    "UnauthenticatedError",
    "UnavailableError",
    "WebhookSignatureError",
    "__version__",
    "close",
    "flush",
    "get_logger",
    "init",
    "log",
    "log_batch",
    "verify_webhook_signature",
]

_default: Logger | None = None
_default_kwargs: dict[str, Any] = {}
_default_lock = threading.Lock()


def init(
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    **options: Any,
) -> Logger:
    """Configures the default logger used by :func:`log` and friends; returns it.

    Takes the arguments of :class:`Logger`. A default logger made earlier is closed first (its
    pending records are sent).
    """
    global _default, _default_kwargs
    logger = Logger(endpoint, api_key, project, **options)
    with _default_lock:
        previous, _default = _default, logger
        _default_kwargs = {"endpoint": endpoint, "api_key": api_key, "project": project, **options}
    if previous is not None:
        previous.close()
    return logger


def get_logger() -> Logger:
    """The default logger, made from the environment if :func:`init` was not called."""
    global _default
    logger = _default
    if logger is not None:
        return logger
    with _default_lock:
        if _default is None:
            _default = Logger(**_default_kwargs)
        return _default


def log(
    input: Any,
    output: Any,
    metadata: Mapping[str, Any] | None = None,
    *,
    reference: Any = None,
    context: Any = None,
    labels: Mapping[str, Any] | None = None,
    trace_id: str | None = None,
) -> Future[str]:
    """Logs one record with the default logger; see :meth:`Logger.log`."""
    return get_logger().log(
        input,
        output,
        metadata,
        reference=reference,
        context=context,
        labels=labels,
        trace_id=trace_id,
    )


def log_batch(rows: Any) -> list[Future[str]]:
    """Logs many records with the default logger; see :meth:`Logger.log_batch`."""
    return get_logger().log_batch(rows)


def flush(timeout: float | None = None) -> None:
    """Waits for the default logger's pending records; see :meth:`Logger.flush`."""
    logger = _default
    if logger is not None:
        logger.flush(timeout)


def close(timeout: float | None = None) -> None:
    """Sends pending records and closes the default logger; see :meth:`Logger.close`."""
    global _default
    with _default_lock:
        logger, _default = _default, None
    if logger is not None:
        logger.close(timeout)


def _after_fork_in_child() -> None:
    """A forked child starts its own default logger, configured from its environment.

    The parent's default logger object is left behind (its queued records fail in the child);
    the next call in the child makes a fresh one from ``TOUCHSTONE_OTLP_ENDPOINT`` and
    ``TOUCHSTONE_API_KEY`` when set, else from the parent's :func:`init` arguments.
    """
    global _default, _default_lock, _default_kwargs
    _default_lock = threading.Lock()
    _default = None
    kwargs = dict(_default_kwargs)
    if os.environ.get("TOUCHSTONE_OTLP_ENDPOINT"):
        kwargs["endpoint"] = None
    if os.environ.get("TOUCHSTONE_API_KEY"):
        kwargs["api_key"] = None
    _default_kwargs = kwargs


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
