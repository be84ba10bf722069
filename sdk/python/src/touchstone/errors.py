"""Exceptions raised by the logger (through its futures, flush and close) and by the client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class TouchstoneError(Exception):
    """Base class of every exception this package raises on purpose."""


# ---- logging ---------------------------------------------------------------------------------


class LoggingError(TouchstoneError):
    """A logged record was not stored; raised by its future (``future.result()``)."""


class QueueFullError(LoggingError):
    """The logger's queue (records or bytes, queued plus in flight) had no room for the record.

    The record was dropped at once so the caller never blocks and memory stays bounded. It usually
    means the server is slow or unreachable; ``flush()`` waits for room.
    """


class RecordTooLargeError(LoggingError):
    """The serialized record alone is larger than the logger's byte limit."""


class ExportError(LoggingError):
    """The server could not be reached or refused the request, after the retries that can help."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """HTTP status of the last answer; None when none arrived (connection, TLS, timeout)."""


class RecordRejectedError(LoggingError):
    """The server accepted the request but refused this record (OTLP partial success)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
        """The server's reason, e.g. ``span with an all-zero span id``."""


class ForkedProcessError(LoggingError):
    """The record was queued by the parent process; a forked child never sends the parent's records.

    The parent still sends it: only the child's copy of the future fails.
    """


class LoggerClosedError(TouchstoneError, RuntimeError):
    """``log()`` was called on a logger that was closed."""


class FlushError(LoggingError):
    """Raised once by ``flush()`` or ``close()`` when records failed since the last such report.

    ``failures`` maps each reason to the number of records that failed for it; every failed record
    also failed its own future with the specific exception.
    """

    def __init__(self, failures: Mapping[str, int]) -> None:
        self.failures: dict[str, int] = dict(failures)
        self.failed = sum(self.failures.values())
        parts = [f"{reason} ({count})" for reason, count in self.failures.items()]
        super().__init__(f"{self.failed} logged records failed: " + "; ".join(parts))


# ---- API client ------------------------------------------------------------------------------


class APIError(TouchstoneError):
    """An error answer of the Touchstone API.

    ``code`` is the service's stable error code (e.g. ``WEBHOOK_NOT_FOUND``), ``kind`` its class
    (``not_found``, ``invalid_argument``, …), ``request_id`` the id to quote from the server log.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        kind: str,
        request_id: str | None = None,
        details: Sequence[Mapping[str, Any]] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.kind = kind
        self.request_id = request_id
        self.details: list[dict[str, Any]] = [dict(d) for d in details]
        self.retry_after = retry_after

    def __str__(self) -> str:
        rid = f", request id {self.request_id}" if self.request_id else ""
        return f"{self.code} ({self.status}{rid}): {self.message}"


class TouchstoneConnectionError(TouchstoneError, ConnectionError):
    """The server could not be reached (no answer): connection refused, TLS failure, timeout."""


class InvalidArgumentError(APIError):
    """The request was malformed or failed validation (400); ``details`` name the fields."""


class UnauthenticatedError(APIError):
    """No API key, or an unknown one (401)."""


class PermissionDeniedError(APIError):
    """The key lacks the permission or the project (403)."""


class NotFoundError(APIError):
    """The resource does not exist or is not visible to the key (404)."""


class ConflictError(APIError):
    """The request conflicts with the current state (409).

    For example an Idempotency-Key reused with another payload, or a request with the same key
    still in flight.
    """


class ResourceExhaustedError(APIError):
    """A limit was reached (413 / 429); ``retry_after`` says when trying again can help."""


class UnavailableError(APIError):
    """The service cannot answer now (503); ``retry_after`` says when to try again."""


class OutcomeUncertainError(UnavailableError):
    """The service cannot tell whether the keyed write happened.

    Retry with the SAME ``idempotency_key`` (kept in ``idempotency_key``): the service then either
    replays the stored outcome or runs the operation once. Never retry with a new key, which could
    perform the operation twice.
    """

    def __init__(self, message: str, *, idempotency_key: str | None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.idempotency_key = idempotency_key

    def __str__(self) -> str:
        key = f" (Idempotency-Key {self.idempotency_key!r})" if self.idempotency_key else ""
        return (
            f"{super().__str__()}: the outcome is uncertain; retry with the same "
            f"idempotency key{key}, never a new one"
        )


class InternalServerError(APIError):
    """The service failed (500); quote ``request_id`` when reporting it."""


class WebhookSignatureError(TouchstoneError):
    """A webhook delivery failed verification; answer it with a 4xx and do not act on it.

    ``reason`` is one of ``missing_header``, ``malformed_header``, ``timestamp_out_of_tolerance``,
    ``signature_mismatch``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
