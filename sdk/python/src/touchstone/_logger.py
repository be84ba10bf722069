"""The non-blocking logger.

Records are serialized on the caller's thread, queued (bounded), and exported in batches over
OTLP/HTTP by background threads (``max_in_flight``, one connection each) per logger and process.
"""

from __future__ import annotations

import atexit
import collections
import gzip
import http.client
import logging
import os
import ssl
import sys
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from typing import Any

from . import _otlp
from ._future import new_future
from ._http import Transport, describe_oserror, retry_after_seconds
from ._rows import iter_rows
from ._values import check_trace_id, json_text, label_text, metadata_text
from ._version import __version__
from .errors import (
    ExportError,
    FlushError,
    ForkedProcessError,
    LoggerClosedError,
    LoggingError,
    QueueFullError,
    RecordRejectedError,
    RecordTooLargeError,
)

_log = logging.getLogger("touchstone")

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
MAX_QUEUE_RECORDS = 1024
MAX_QUEUE_BYTES = 8 * 1024 * 1024
# The server lists at most 1000 refused spans per request (docs/ingest.md): batches stay below.
MAX_BATCH_RECORDS = 1000
MAX_IN_FLIGHT = 4
# Well under the server's default body limit (16 MiB).
MAX_BATCH_BYTES = 4 * 1024 * 1024
# Retry-After beyond this is not waited for: the batch fails and the caller hears of it.
MAX_RETRY_AFTER_SECONDS = 60.0
_RETRYABLE_STATUS = frozenset((408, 429, 502, 503, 504))

_K_INPUT = _otlp.key_prefix("touchstone.record.input")
_K_OUTPUT = _otlp.key_prefix("touchstone.record.output")
_K_REFERENCE = _otlp.key_prefix("touchstone.record.reference")
_K_CONTEXT = _otlp.key_prefix("touchstone.record.context")
_K_METADATA = _otlp.key_prefix("touchstone.record.metadata")
_LABEL_PREFIX = "touchstone.label."
_ZERO_SPAN_ID = bytes(8)

_urandom = os.urandom
_time_ns = time.time_ns
_monotonic = time.monotonic
_string_attribute = _otlp.string_attribute
_span_entry = _otlp.span_entry


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


class _Record:
    __slots__ = ("future", "payload", "size", "trace_id")

    def __init__(self, future: Future[str], payload: bytes, trace_id: str) -> None:
        self.future = future
        self.payload = payload
        self.size = len(payload)
        self.trace_id = trace_id


class _Marker:
    """A flush barrier in the queue: set once every record queued before it is resolved."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


def _fail(future: Future[str], error: BaseException) -> None:
    # try/except, not contextlib.suppress: this runs for every record on the export thread.
    try:  # noqa: SIM105
        future.set_exception(error)
    except InvalidStateError:  # cancelled by its holder; nothing is waiting for it
        pass


def _succeed(future: Future[str], trace_id: str) -> None:
    try:  # noqa: SIM105
        future.set_result(trace_id)
    except InvalidStateError:
        pass


def _traces_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


class Logger:
    """Logs records (input, output, metadata, …) to Touchstone without blocking the caller.

    Each ``log()`` serializes the record on the calling thread and returns a
    ``concurrent.futures.Future`` that resolves to the record's trace id once the server has
    durably stored it, or fails with a :class:`~touchstone.errors.LoggingError` saying why.
    Background threads export queued records in batches over OTLP/HTTP (protobuf).

    Memory is bounded: at most ``max_queue_records`` records and ``max_queue_bytes`` bytes are
    queued or in flight; a record that does not fit fails its future at once
    (:class:`~touchstone.errors.QueueFullError`) and the call never blocks.

    Args:
        endpoint: Base URL of the server's OTLP/HTTP receiver (``/v1/traces`` is appended unless
            present). Default: ``TOUCHSTONE_OTLP_ENDPOINT``, else ``http://127.0.0.1:4318``.
        api_key: API key with ``traces.write`` (the ``ingest`` role). Default:
            ``TOUCHSTONE_API_KEY``; none when unset (a server without auth).
        project: Project to store records in; default the key's project (``default`` without
            auth). A key may only write to its own project.
        labels: Labels added to every record (a call's own labels win on a clash).
        service_name: ``service.name`` of the records. Default: ``OTEL_SERVICE_NAME``, else
            ``unknown_service:python``.
        span_name: Name of each record's span (the trace name in listings).
        max_queue_records: Records queued or in flight at most (≤ 1024).
        max_queue_bytes: Serialized bytes queued or in flight at most (≤ 8 MiB).
        batch_size: Records per export request at most (≤ 1000).
        max_in_flight: Export requests in flight at once, each from its own thread on its own
            connection (1 to 4): while the server stores one batch, the next is on its way.
            Records in flight count against the queue's limits all the same.
        flush_interval: Seconds a record waits at most for a batch to fill before it is sent.
        exit_timeout: Seconds pending records get to drain at interpreter exit.
        timeout: Seconds for each HTTP request.
        max_retries: Retries of a batch after connection failures and retryable answers (408,
            429, 502, 503, 504), with exponential backoff honouring ``Retry-After``.
        retry_backoff: First backoff delay in seconds (doubles per retry, capped at 30 s).
        compression: ``"gzip"`` to compress requests; none by default.
        ssl_context: TLS context for https endpoints; default trusts ``SSL_CERT_FILE`` when set.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        api_key: str | None = None,
        project: str | None = None,
        *,
        labels: Mapping[str, Any] | None = None,
        service_name: str | None = None,
        span_name: str = "log",
        max_queue_records: int = MAX_QUEUE_RECORDS,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        batch_size: int = 512,
        max_in_flight: int = 2,
        flush_interval: float = 0.2,
        exit_timeout: float = 30.0,
        timeout: float = 10.0,
        max_retries: int = 6,
        retry_backoff: float = 0.5,
        compression: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not 1 <= max_queue_records <= MAX_QUEUE_RECORDS:
            raise ValueError(f"max_queue_records must be between 1 and {MAX_QUEUE_RECORDS}")
        if not 1 <= max_queue_bytes <= MAX_QUEUE_BYTES:
            raise ValueError(f"max_queue_bytes must be between 1 and {MAX_QUEUE_BYTES} (8 MiB)")
        if not 1 <= batch_size <= MAX_BATCH_RECORDS:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_RECORDS}")
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(f"max_in_flight must be between 1 and {MAX_IN_FLIGHT}")
        if compression not in (None, "gzip"):
            raise ValueError('compression must be None or "gzip"')
        if flush_interval <= 0 or timeout <= 0 or exit_timeout < 0 or max_retries < 0:
            raise ValueError(
                "flush_interval and timeout must be positive; exit_timeout and max_retries must "
                "not be negative"
            )
        endpoint = endpoint or os.environ.get("TOUCHSTONE_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = _traces_url(endpoint)
        self.project = project
        self._api_key = api_key if api_key is not None else os.environ.get("TOUCHSTONE_API_KEY")
        # Parsed now so a bad endpoint fails at construction, not in the background.
        Transport(self.endpoint, timeout=timeout)
        split = urllib.parse.urlsplit(self.endpoint)
        self._base = urllib.parse.urlunsplit((split.scheme, split.netloc, "", "", ""))
        query = split.query
        if project:
            query = (query + "&" if query else "") + urllib.parse.urlencode({"project": project})
        self._path = split.path + (f"?{query}" if query else "")
        headers = {"Content-Type": "application/x-protobuf"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if compression == "gzip":
            headers["Content-Encoding"] = "gzip"
        self._headers = headers
        self._compression = compression
        self._timeout = timeout
        self._ssl_context = ssl_context
        self._max_records = max_queue_records
        self._max_bytes = max_queue_bytes
        self._batch_size = batch_size
        self._max_in_flight = max_in_flight
        self._interval = flush_interval
        self.exit_timeout = exit_timeout
        self._max_retries = max_retries
        self._backoff = retry_backoff
        self._labels = {k: label_text(k, v) for k, v in (labels or {}).items()}
        self._label_bytes = self._encode_labels(self._labels)
        self._name = span_name.encode("utf-8")
        service = service_name or os.environ.get("OTEL_SERVICE_NAME") or "unknown_service:python"
        self._template = _otlp.RequestTemplate(
            [
                ("service.name", service),
                ("telemetry.sdk.name", "touchstone-sdk"),
                ("telemetry.sdk.language", "python"),
                ("telemetry.sdk.version", __version__),
            ],
            "touchstone",
            __version__,
        )
        self._closed = False
        self._init_state()
        _LOGGERS.add(self)

    # ---- state (rebuilt in a forked child) ---------------------------------------------------

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Held while futures are resolved, and across fork(), so a child never inherits a
        # future's lock mid-update.
        self._resolve_lock = threading.RLock()
        self._queue: collections.deque[_Record | _Marker] = collections.deque()
        self._queued = 0  # records in the queue
        self._pending = 0  # records queued or in flight
        self._pending_bytes = 0
        self._markers = 0  # markers in the queue
        self._oldest = 0.0
        self._idle = 0  # export threads waiting for records
        self._stopping = False
        self._abort = threading.Event()
        # Batches are numbered as they are taken; those taken and not yet settled, by number.
        self._taken = 0
        self._in_flight: dict[int, list[_Record]] = {}
        # Flush barriers taken from the queue: each waits until every batch numbered below it
        # is settled (another thread may still be sending an earlier batch).
        self._barriers: list[tuple[int, _Marker]] = []
        self._failures: dict[str, int] = {}
        self._threads: list[threading.Thread] = []
        self._transports: list[Transport] = []
        self._pid = os.getpid()

    # ---- logging -------------------------------------------------------------------------------

    def log(
        self,
        input: Any,
        output: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        reference: Any = None,
        context: Any = None,
        labels: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> Future[str]:
        """Queues one record and returns a future resolving to its trace id once stored.

        Args:
            input: What the agent was given (text, or any JSON-like value; tensors and arrays are
                converted).
            output: What it answered.
            metadata: Extra fields, at most 256 keys of at most 128 characters and 64 KiB in
                total as JSON; non-finite floats are sent as ``NaN``, ``Infinity``,
                ``-Infinity``; keys starting ``touchstone.`` are ignored.
            reference: The expected answer, for evaluators that compare against one.
            context: Retrieved documents or other grounding (a list, or one item).
            labels: Labels of this record (``{"split": "eval"}``), used by policies and filters.
            trace_id: The record's trace id: 32 lowercase hex characters, not all zeros. When
                omitted, a new one: 48 bits of Unix milliseconds, then 80 random bits.

        Raises:
            ValueError: A metadata limit or the trace id format was violated (nothing queued).
            LoggerClosedError: The logger was closed.
        """
        record = self._prepare(input, output, metadata, reference, context, labels, trace_id)
        return self._enqueue(record)

    def log_batch(self, rows: Any) -> list[Future[str]]:
        """Queues many records; returns one future per row, in order.

        ``rows`` is a list of dicts, a pandas DataFrame, a Hugging Face ``datasets.Dataset`` or
        any iterable of mappings. Recognised keys (columns) are ``input``, ``output``,
        ``metadata`` (a mapping), ``reference`` (or ``expected``), ``context``, ``labels`` (a
        mapping) and ``trace_id``; any other key goes into the record's metadata. Missing cells
        (None, NaN, NA) are left out.

        Every row is serialized and checked before any is queued: a bad row raises ValueError
        naming its index and nothing is queued.
        """
        prepared = []
        for i, row in enumerate(iter_rows(rows)):
            try:
                prepared.append(self._prepare_row(row))
            except (TypeError, ValueError) as err:
                raise ValueError(f"row {i}: {err}") from err
        return [self._enqueue(record) for record in prepared]

    def _prepare_row(self, row: Mapping[str, Any]) -> _Record:
        metadata: dict[str, Any] | None = None
        given = row.get("metadata")
        if given is not None:
            if not isinstance(given, Mapping):
                raise TypeError("metadata must be a mapping")
            metadata = dict(given)
        for key, value in row.items():
            if key not in _ROW_FIELDS:
                if not isinstance(key, str):
                    raise ValueError(f"column names must be str; got {type(key).__name__}")
                metadata = metadata if metadata is not None else {}
                metadata.setdefault(key, value)
        reference = row.get("reference")
        if reference is None:
            reference = row.get("expected")
        if row.get("input") is None and row.get("output") is None:
            raise ValueError("a row needs an input or an output")
        labels = row.get("labels")
        if labels is not None and not isinstance(labels, Mapping):
            raise TypeError("labels must be a mapping")
        return self._prepare(
            row.get("input"),
            row.get("output"),
            metadata,
            reference,
            row.get("context"),
            labels,
            row.get("trace_id"),
        )

    def _encode_labels(self, labels: Mapping[str, str]) -> bytes:
        return b"".join(
            _string_attribute(_otlp.key_prefix(_LABEL_PREFIX + k), _utf8(v))
            for k, v in labels.items()
        )

    def _prepare(
        self,
        input: Any,
        output: Any,
        metadata: Mapping[str, Any] | None,
        reference: Any,
        context: Any,
        labels: Mapping[str, Any] | None,
        trace_id: str | None,
    ) -> _Record:
        ids = _urandom(24)
        now = _time_ns()
        if trace_id is None:
            # Time-ordered, as UUIDv7 and X-Ray ids are: 48 bits of Unix milliseconds, then 80
            # random bits. Stores that key traces by id (the server's B-tree indexes) then add
            # each new trace at the end instead of at a random page: fewer pages written per
            # batch. The random part keeps ids unique (W3C requires only the last 7 bytes random).
            tid = (now // 1_000_000).to_bytes(6, "big") + ids[6:16]
            hex_id = tid.hex()
        else:
            hex_id = check_trace_id(trace_id)
            tid = bytes.fromhex(hex_id)
        span_id = ids[16:]
        if span_id == _ZERO_SPAN_ID:
            span_id = b"\x01" + span_id[1:]
        attrs = b""
        if input is not None:
            attrs += _string_attribute(_K_INPUT, _utf8(json_text(input)))
        if output is not None:
            attrs += _string_attribute(_K_OUTPUT, _utf8(json_text(output)))
        if reference is not None:
            attrs += _string_attribute(_K_REFERENCE, _utf8(json_text(reference)))
        if context is not None:
            items = context if isinstance(context, (list, tuple)) else [context]
            attrs += _string_attribute(_K_CONTEXT, _utf8(json_text(items)))
        if metadata is not None:
            text = metadata_text(metadata)
            if text is not None:
                attrs += _string_attribute(_K_METADATA, _utf8(text))
        if labels:
            merged = {**self._labels, **{k: label_text(k, v) for k, v in labels.items()}}
            attrs += self._encode_labels(merged)
        else:
            attrs += self._label_bytes
        payload = _span_entry(tid, span_id, self._name, now, now, attrs)
        return _Record(new_future(), payload, hex_id)

    def _enqueue(self, record: _Record) -> Future[str]:
        future = record.future
        error: LoggingError | None = None
        with self._lock:
            if self._closed:
                raise LoggerClosedError("the logger is closed; create a new one to log again")
            if record.size > self._max_bytes:
                error = RecordTooLargeError(
                    f"the record is {record.size} bytes serialized; the logger holds at most "
                    f"{self._max_bytes} bytes"
                )
            elif self._pending >= self._max_records or (
                self._pending_bytes + record.size > self._max_bytes
            ):
                error = QueueFullError(
                    f"the logger's queue is full ({self._pending} records, "
                    f"{self._pending_bytes} bytes queued or in flight; limits "
                    f"{self._max_records} records and {self._max_bytes} bytes): the record was "
                    "dropped; the server may be slow or unreachable"
                )
            else:
                self._queue.append(record)
                self._queued += 1
                self._pending += 1
                self._pending_bytes += record.size
                if self._queued == 1:
                    self._oldest = _monotonic()
                    if self._idle:
                        self._cond.notify()
                elif self._queued == self._batch_size and self._idle:
                    self._cond.notify()
                if not self._threads:
                    self._start_workers()
                return future
            self._failures[_reason_of(error)] = self._failures.get(_reason_of(error), 0) + 1
        _fail(future, error)
        return future

    # ---- flush and close --------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Waits until every record logged before the call is stored or has failed.

        Raises:
            FlushError: Records failed since the last flush/close that reported failures (each
                failure is reported once, to the call that sees it).
            TimeoutError: Records were still pending after ``timeout`` seconds.
        """
        if threading.current_thread() in self._threads:
            raise RuntimeError("flush() cannot be called from the logger's own thread")
        marker: _Marker | None = None
        with self._lock:
            if os.getpid() == self._pid and self._pending > 0 and self._threads:
                marker = _Marker()
                self._queue.append(marker)
                self._markers += 1
                if self._idle:
                    self._cond.notify()
        if marker is not None and not marker.event.wait(timeout):
            raise TimeoutError(
                f"flush timed out after {timeout} s with {self._pending} records still pending"
            )
        self._raise_failures()

    def close(self, timeout: float | None = None) -> None:
        """Sends what is pending (waiting at most ``timeout`` seconds), then stops the logger.

        Safe to call twice. Records still queued when the timeout passes fail.

        Raises:
            FlushError: Records failed since the last report (once).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            threads = list(self._threads) if os.getpid() == self._pid else []
            self._cond.notify_all()
        if threads:
            deadline = None if timeout is None else _monotonic() + timeout
            for thread in threads:
                thread.join(None if deadline is None else max(0.0, deadline - _monotonic()))
            if any(thread.is_alive() for thread in threads):
                self._abort.set()
                with self._lock:
                    self._cond.notify_all()
                self._fail_queued(f"not sent: close() timed out after {timeout:.1f} s", ExportError)
                with self._lock:
                    sending = sum(len(batch) for batch in self._in_flight.values())
                    if sending:
                        # Their futures settle when the request ends; the caller hears now.
                        key = (
                            f"not confirmed: close() timed out after {timeout:.1f} s while sending"
                        )
                        self._failures[key] = self._failures.get(key, 0) + sending
        self._raise_failures()

    def _raise_failures(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, {}
        if failures:
            raise FlushError(failures)

    def _fail_queued(self, reason: str, kind: Callable[[str], LoggingError]) -> None:
        with self._lock:
            records = [r for r in self._queue if isinstance(r, _Record)]
            markers = [m for m in self._queue if isinstance(m, _Marker)]
            self._queue.clear()
            self._queued = 0
            self._markers = 0
            for r in records:
                self._pending -= 1
                self._pending_bytes -= r.size
            if records:
                self._failures[reason] = self._failures.get(reason, 0) + len(records)
        with self._resolve_lock:
            for r in records:
                _fail(r.future, kind(reason))
        for m in markers:
            m.event.set()

    # ---- the export threads -----------------------------------------------------------------

    def _start_workers(self) -> None:
        # One thread (and connection) per request in flight: while the server stores one batch,
        # the next is on its way.
        for i in range(self._max_in_flight):
            thread = threading.Thread(target=self._run, name=f"touchstone-logger-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()
        _register_child_drain()

    def _run(self) -> None:
        transport = Transport(self._base, timeout=self._timeout, ssl_context=self._ssl_context)
        with self._lock:
            self._transports.append(transport)
        try:
            while True:
                number, batch, done = self._next_batch()
                if batch:
                    try:
                        self._export(transport, batch)
                    except Exception as err:  # never leave futures hanging
                        _log.exception("touchstone logger: export failed unexpectedly")
                        self._resolve(batch, {}, ExportError(f"internal error: {err!r}"))
                    finally:
                        with self._lock:
                            del self._in_flight[number]
                            self._release_barriers()
                if done:
                    return
        finally:
            transport.close()

    def _release_barriers(self) -> None:
        """Sets the barriers whose earlier batches are all settled (the lock is held)."""
        if not self._barriers:
            return
        lowest = min(self._in_flight, default=self._taken)
        waiting = []
        for needed, marker in self._barriers:
            if lowest >= needed:
                marker.event.set()
            else:
                waiting.append((needed, marker))
        self._barriers = waiting

    def _next_batch(self) -> tuple[int, list[_Record], bool]:
        """Waits for a batch to send: (its number, its records, whether the thread should end)."""
        with self._cond:
            while True:
                if self._abort.is_set():
                    return 0, [], True
                if self._queue:
                    if (
                        self._stopping
                        or self._markers > 0
                        or self._queued >= self._batch_size
                        or _monotonic() - self._oldest >= self._interval
                    ):
                        break
                    self._idle += 1
                    self._cond.wait(self._interval - (_monotonic() - self._oldest))
                    self._idle -= 1
                elif self._stopping:
                    return 0, [], True
                else:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
            batch: list[_Record] = []
            size = 0
            queue = self._queue
            number = self._taken
            while queue and len(batch) < self._batch_size:
                item = queue[0]
                if isinstance(item, _Marker):
                    queue.popleft()
                    self._markers -= 1
                    # The barrier holds once this batch and every earlier one are settled.
                    self._barriers.append((number + 1 if batch else number, item))
                    break
                if batch and size + item.size > MAX_BATCH_BYTES:
                    break
                queue.popleft()
                batch.append(item)
                size += item.size
            self._queued -= len(batch)
            if self._queued:
                self._oldest = _monotonic()
            if batch:
                self._taken += 1
                self._in_flight[number] = batch
            self._release_barriers()
            return number, batch, False

    def _export(self, transport: Transport, batch: list[_Record]) -> None:
        body = self._template.request([r.payload for r in batch])
        if self._compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
        attempt = 0
        while True:
            status: int | None = None
            delay: float | None = None
            try:
                answer = transport.request("POST", self._path, body, self._headers)
            except (OSError, http.client.HTTPException) as err:
                reason = f"could not reach {self._base}: {describe_oserror(err)}"
                # A certificate that does not verify will not verify on the next try either.
                retryable = not isinstance(err, ssl.SSLCertVerificationError)
            else:
                status = answer.status
                content_type = answer.header("content-type") or ""
                if 200 <= status < 300:
                    self._settle(batch, answer.body, content_type)
                    return
                if status == 413 and len(batch) > 1:
                    half = len(batch) // 2
                    self._export(transport, batch[:half])
                    self._export(transport, batch[half:])
                    return
                message = _otlp.parse_status_message(answer.body, content_type)
                reason = f"HTTP {status} from {self._base}" + (f": {message}" if message else "")
                retryable = status in _RETRYABLE_STATUS
                delay = retry_after_seconds(answer.header("retry-after"))
            if not retryable or attempt >= self._max_retries or self._abort.is_set():
                if retryable and attempt > 0:
                    reason += f" (gave up after {attempt} retries)"
                self._resolve(batch, {}, ExportError(reason, status=status))
                return
            wait = min(self._backoff * (2**attempt), 30.0)
            if delay is not None:
                if delay > MAX_RETRY_AFTER_SECONDS:
                    reason += f" (Retry-After {delay:.0f} s is longer than the logger waits)"
                    self._resolve(batch, {}, ExportError(reason, status=status))
                    return
                wait = max(delay, 0.0)
            attempt += 1
            if self._abort.wait(wait):
                self._resolve(
                    batch, {}, ExportError(reason + " (abandoned at close)", status=status)
                )
                return

    def _settle(self, batch: list[_Record], body: bytes, content_type: str) -> None:
        try:
            partial = _otlp.parse_export_response(body, content_type)
        except ValueError:
            # 2xx means stored; an unreadable body cannot undo that.
            partial = _otlp.PartialSuccess(0, "", ())
        if partial.rejected == 0:
            self._resolve(batch, {}, None)
            return
        refused: dict[int, str] = {}
        for span in partial.spans:
            if 0 <= span.index < len(batch):
                refused[span.index] = span.reason
        if len(refused) < partial.rejected:
            # The server did not say which records it refused: none can be reported as stored.
            reason = (
                f"the server refused {partial.rejected} of {len(batch)} records without saying "
                f"which: {partial.summary}"
            )
            self._resolve(batch, {}, RecordRejectedError(reason, reason=partial.summary))
            return
        self._resolve(batch, refused, None)

    def _resolve(
        self, batch: list[_Record], refused: Mapping[int, str], error: LoggingError | None
    ) -> None:
        failed: dict[str, int] = {}
        with self._resolve_lock:
            for i, record in enumerate(batch):
                if error is not None:
                    _fail(record.future, error)
                    key = str(error)
                elif i in refused:
                    reason = refused[i]
                    _fail(
                        record.future,
                        RecordRejectedError(
                            f"the server refused the record: {reason}", reason=reason
                        ),
                    )
                    key = f"refused by the server: {reason}"
                else:
                    _succeed(record.future, record.trace_id)
                    continue
                failed[key] = failed.get(key, 0) + 1
        with self._lock:
            self._pending -= len(batch)
            self._pending_bytes -= sum(r.size for r in batch)
            for key, count in failed.items():
                self._failures[key] = self._failures.get(key, 0) + count

    # ---- fork and exit ----------------------------------------------------------------------

    def _before_fork(self) -> None:
        self._resolve_lock.acquire()
        self._lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self._lock.release()
        self._resolve_lock.release()

    def _after_fork_in_child(self) -> None:
        inherited = [r for r in self._queue if isinstance(r, _Record)]
        for batch in self._in_flight.values():
            inherited.extend(batch)
        markers = [m for m in self._queue if isinstance(m, _Marker)]
        markers.extend(marker for _, marker in self._barriers)
        transports = self._transports
        self._init_state()
        for transport in transports:
            transport.forget()
        # Fresh locks above: the futures' own locks were not held (the resolve lock was ours).
        error = ForkedProcessError(
            "the record was logged by the parent process before fork(); the parent sends it, "
            "the child does not"
        )
        for r in inherited:
            _fail(r.future, error)
        for m in markers:
            m.event.set()

    def _drain_at_exit(self, deadline: float) -> None:
        if self._closed or os.getpid() != self._pid:
            return
        try:
            self.close(timeout=max(0.0, min(self.exit_timeout, deadline - _monotonic())))
        except FlushError as err:
            _log.warning("touchstone: at exit, %s", err)
        except Exception:
            _log.exception("touchstone: draining the logger at exit failed")


_ROW_FIELDS = frozenset(
    ("input", "output", "metadata", "reference", "expected", "context", "labels", "trace_id")
)


def _reason_of(error: LoggingError) -> str:
    if isinstance(error, QueueFullError):
        return "dropped: the queue was full"
    return "dropped: larger than the queue's byte limit"


_LOGGERS: weakref.WeakSet[Logger] = weakref.WeakSet()


def _before_fork() -> None:
    for logger in list(_LOGGERS):
        logger._before_fork()


def _after_fork_in_parent() -> None:
    for logger in list(_LOGGERS):
        logger._after_fork_in_parent()


def _after_fork_in_child() -> None:
    for logger in list(_LOGGERS):
        logger._after_fork_in_child()


def drain_all() -> None:
    """Drains every live logger (used at interpreter exit)."""
    loggers = list(_LOGGERS)
    if not loggers:
        return
    deadline = _monotonic() + max(logger.exit_timeout for logger in loggers)
    for logger in loggers:
        logger._drain_at_exit(deadline)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
atexit.register(drain_all)

_child_drain_registered_pid = 0


def _register_child_drain() -> None:
    """Multiprocessing children end with os._exit (no atexit): drain through its finalizers."""
    global _child_drain_registered_pid
    mp = sys.modules.get("multiprocessing")
    pid = os.getpid()
    if mp is None or _child_drain_registered_pid == pid:
        return
    if mp.parent_process() is None:
        return
    _child_drain_registered_pid = pid
    import multiprocessing.util  # noqa: PLC0415 (only in multiprocessing children)

    multiprocessing.util.Finalize(None, drain_all, exitpriority=10)
