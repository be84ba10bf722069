"""A small synchronous client of the Touchstone API (REST under /v1alpha1 and the Connect RPCs)."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from ._http import Response, Transport, describe_oserror, retry_after_seconds
from ._rows import iter_rows
from ._values import json_text, to_json_value
from .errors import (
    APIError,
    ConflictError,
    InternalServerError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUncertainError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TouchstoneConnectionError,
    UnauthenticatedError,
    UnavailableError,
)
from .webhooks import verify_webhook_signature as _verify

DEFAULT_BASE_URL = "http://127.0.0.1:4318"
MAX_RETRY_AFTER_SECONDS = 60.0
_FINAL_RUN_STATUSES = frozenset(
    ("RUN_STATUS_SUCCEEDED", "RUN_STATUS_FAILED", "RUN_STATUS_ERROR", "RUN_STATUS_CANCELLED")
)

_KIND_ERRORS: dict[str, type[APIError]] = {
    "invalid_argument": InvalidArgumentError,
    "failed_precondition": InvalidArgumentError,
    "out_of_range": InvalidArgumentError,
    "unsupported_media_type": InvalidArgumentError,
    "unauthenticated": UnauthenticatedError,
    "permission_denied": PermissionDeniedError,
    "not_found": NotFoundError,
    "already_exists": ConflictError,
    "aborted": ConflictError,
    "resource_exhausted": ResourceExhaustedError,
    "payload_too_large": ResourceExhaustedError,
    "unavailable": UnavailableError,
    "internal": InternalServerError,
    "unknown": InternalServerError,
    "data_loss": InternalServerError,
}

_STATUS_KINDS = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "aborted",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "resource_exhausted",
    500: "internal",
    501: "unimplemented",
    503: "unavailable",
    504: "deadline_exceeded",
}

UNCERTAIN_CODE = "IDEMPOTENCY_OUTCOME_UNCERTAIN"


def _error_from(answer: Response, idempotency_key: str | None) -> APIError:
    status = answer.status
    code = ""
    kind = ""
    message = ""
    request_id: str | None = answer.header("request-id") or answer.header("x-request-id")
    details: list[Mapping[str, Any]] = []
    try:
        data = json.loads(answer.body) if answer.body else None
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]  # REST: {"error": {code, kind, message, requestId, details}}
        code = str(err.get("code") or "")
        kind = str(err.get("kind") or "")
        message = str(err.get("message") or "")
        request_id = str(err.get("requestId") or "") or request_id
        details = [d for d in err.get("details") or [] if isinstance(d, Mapping)]
    elif isinstance(data, dict) and isinstance(data.get("code"), str):
        kind = data["code"]  # Connect: {code, message, details}
        message = str(data.get("message") or "")
        for d in data.get("details") or []:
            debug = d.get("debug") if isinstance(d, Mapping) else None
            if isinstance(debug, Mapping):
                code = code or str(debug.get("reason") or debug.get("code") or "")
                if isinstance(debug.get("requestId"), str):
                    request_id = debug["requestId"]
    kind = kind or _STATUS_KINDS.get(status, "unknown")
    code = code or kind.upper()
    if not message:
        text = answer.body[:200].decode("utf-8", "replace").strip()
        message = f"HTTP {status}" + (f": {text}" if text and not text.startswith("<") else "")
    retry_after = retry_after_seconds(answer.header("retry-after"))
    common: dict[str, Any] = {
        "status": status,
        "code": code,
        "kind": kind,
        "request_id": request_id,
        "details": details,
        "retry_after": retry_after,
    }
    if code == UNCERTAIN_CODE or (kind == "unavailable" and "uncertain" in message.lower()):
        return OutcomeUncertainError(message, idempotency_key=idempotency_key, **common)
    return _KIND_ERRORS.get(kind, APIError)(message, **common)


class Client:
    """Calls the Touchstone API.

    Errors raise :class:`~touchstone.errors.APIError` subclasses carrying the service's error
    ``code``, ``message`` and ``request_id``. Writes that take an ``idempotency_key`` send it as
    ``Idempotency-Key`` and are retried (with the same key) on connection failures, 429 and 503;
    an answer that the outcome is uncertain raises
    :class:`~touchstone.errors.OutcomeUncertainError`: retry with the same key, never a new one.

    Args:
        base_url: The server's address. Default: ``TOUCHSTONE_SERVER``, else
            ``http://127.0.0.1:4318``.
        api_key: API key. Default: ``TOUCHSTONE_API_KEY``; none when unset.
        project: Default project of calls that take one (else the key's own).
        timeout: Seconds per HTTP request.
        max_retries: Retries of safe and keyed requests after connection failures, 429 and 503.
        ssl_context: TLS context for https; default trusts ``SSL_CERT_FILE`` when set.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        project: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = (
            base_url or os.environ.get("TOUCHSTONE_SERVER") or DEFAULT_BASE_URL
        ).rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("TOUCHSTONE_API_KEY")
        self.project = project
        self._timeout = timeout
        self._max_retries = max_retries
        self._ssl_context = ssl_context
        Transport(self.base_url, timeout=timeout)  # a bad URL fails here
        self._local = threading.local()

    def _transport(self) -> Transport:
        cached = getattr(self._local, "transport", None)
        pid = os.getpid()
        if cached is None or cached[0] != pid:
            if cached is not None:
                cached[1].forget()  # the parent's connection, inherited through fork
            transport = Transport(
                self.base_url, timeout=self._timeout, ssl_context=self._ssl_context
            )
            self._local.transport = (pid, transport)
            return transport
        return cached[1]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Closes this thread's connection."""
        cached = getattr(self._local, "transport", None)
        if cached is not None:
            cached[1].close()
            self._local.transport = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- generic call -----------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        idempotency_key: str | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> Any:
        """Sends one request to ``path`` (e.g. ``/v1alpha1/webhooks``); returns the parsed answer.

        ``body`` is sent as JSON unless it is ``bytes`` (sent as is, with ``content_type``,
        default ``application/octet-stream``). Query values that are None are left out; lists
        repeat the parameter. The answer is the decoded JSON, the raw bytes for other content
        types, or None when empty.
        """
        method = method.upper()
        if not path.startswith("/"):
            path = "/" + path
        params = [
            (k, str(x).lower() if isinstance(x, bool) else str(x))
            for k, v in (query or {}).items()
            if v is not None
            for x in (v if isinstance(v, (list, tuple)) else [v])
        ]
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        send_headers: dict[str, str] = {"Accept": "application/json"}
        payload: bytes | None = None
        if isinstance(body, (bytes, bytearray, memoryview)):
            payload = bytes(body)
            send_headers["Content-Type"] = content_type or "application/octet-stream"
        elif body is not None:
            payload = json_text(body).encode("utf-8")
            send_headers["Content-Type"] = content_type or "application/json"
        if self._api_key:
            send_headers["Authorization"] = f"Bearer {self._api_key}"
        if idempotency_key is not None:
            if not idempotency_key or not all(33 <= ord(c) <= 126 for c in idempotency_key):
                raise ValueError("idempotency_key must be 1-255 printable ASCII characters")
            send_headers["Idempotency-Key"] = idempotency_key
        send_headers.update(headers or {})
        retry_safe = method in ("GET", "HEAD", "OPTIONS") or idempotency_key is not None
        attempt = 0
        while True:
            try:
                answer = self._transport().request(
                    method, target, payload, send_headers, idempotent=retry_safe
                )
            except (OSError, http.client.HTTPException) as err:
                if retry_safe and attempt < self._max_retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                raise TouchstoneConnectionError(
                    f"{method} {path}: could not reach {self.base_url}: {describe_oserror(err)}"
                ) from err
            if 200 <= answer.status < 300:
                return _decode(answer)
            error = _error_from(answer, idempotency_key)
            retryable = answer.status in (429, 503) and not isinstance(error, OutcomeUncertainError)
            if (
                retry_safe
                and retryable
                and attempt < self._max_retries
                and (error.retry_after is None or error.retry_after <= MAX_RETRY_AFTER_SECONDS)
            ):
                self._sleep(attempt, error.retry_after)
                attempt += 1
                continue
            raise error

    @staticmethod
    def _sleep(attempt: int, retry_after: float | None) -> None:
        time.sleep(retry_after if retry_after is not None else min(0.5 * 2**attempt, 10.0))

    def _project(self, project: str | None) -> str | None:
        return project if project is not None else self.project

    def _paged(self, path: str, key: str, query: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self.call("GET", path, query={**query, "page_token": token})
            yield from page.get(key, [])
            token = page.get("next_page_token")
            if not token:
                return

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(
        self,
        records: Any,
        evaluators: Iterable[str | Mapping[str, Any]],
        project: str | None = None,
        *,
        judge: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Scores records with named evaluators now (``POST /v1alpha1/evaluate``).

        ``records`` takes what ``Logger.log_batch`` takes (dicts, a DataFrame, a Dataset);
        ``evaluators`` are names (``"exact-match"``) or ``{"ref", "name"?, "params"?}`` mappings.
        Returns ``{"results": [{"recordId", "results": [Result…]}]}``.
        """
        body: dict[str, Any] = {
            "records": [to_json_value(dict(row)) for row in iter_rows(records)],
            "evaluators": [
                {"ref": e} if isinstance(e, str) else to_json_value(dict(e)) for e in evaluators
            ],
        }
        if self._project(project) is not None:
            body["project"] = self._project(project)
        if judge is not None:
            body["judge"] = judge
        result: dict[str, Any] = self.call(
            "POST", "/v1alpha1/evaluate", body, idempotency_key=idempotency_key
        )
        return result

    # ---- webhooks ---------------------------------------------------------------------------

    def apply_webhook(
        self,
        webhook: Mapping[str, Any] | None = None,
        *,
        project: str | None = None,
        validate_only: bool = False,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Creates or replaces a webhook (``name``, ``url``, ``events``, ``secret``, ``disabled``).

        Pass the resource as a mapping (flat or declarative) or as keyword fields. The answer
        holds ``secret`` only when the service just generated it: keep it, it is not shown again.
        """
        body = {**(webhook or {}), **fields}
        result: dict[str, Any] = self.call(
            "POST",
            "/v1alpha1/webhooks",
            body,
            idempotency_key=idempotency_key,
            query={"project": self._project(project), "validate_only": validate_only or None},
        )
        return result

    def get_webhook(self, name: str, project: str | None = None) -> dict[str, Any]:
        """One webhook (never its secret)."""
        result: dict[str, Any] = self.call(
            "GET", f"/v1alpha1/webhooks/{_seg(name)}", query={"project": self._project(project)}
        )
        return result

    def list_webhooks(self, project: str | None = None) -> Iterator[dict[str, Any]]:
        """Every webhook of the project, page by page."""
        return self._paged("/v1alpha1/webhooks", "webhooks", {"project": self._project(project)})

    def delete_webhook(
        self, name: str, project: str | None = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Deletes a webhook; its queued deliveries fail."""
        result: dict[str, Any] = self.call(
            "DELETE",
            f"/v1alpha1/webhooks/{_seg(name)}",
            idempotency_key=idempotency_key,
            query={"project": self._project(project)},
        )
        return result

    def test_webhook(self, name: str, project: str | None = None) -> dict[str, Any]:
        """Queues a ``ping`` delivery now; returns its delivery record."""
        result: dict[str, Any] = self.call(
            "POST",
            f"/v1alpha1/webhooks/{_seg(name)}:test",
            query={"project": self._project(project)},
        )
        return result

    def list_webhook_deliveries(
        self, name: str, project: str | None = None, *, page_size: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The webhook's delivery records, newest first, fetched page by page as iterated."""
        return self._paged(
            f"/v1alpha1/webhooks/{_seg(name)}/deliveries",
            "deliveries",
            {"project": self._project(project), "page_size": page_size},
        )

    verify_webhook_signature = staticmethod(_verify)

    # ---- runs -------------------------------------------------------------------------------

    def create_run(
        self,
        spec: Mapping[str, Any],
        *,
        project: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Starts an offline run from a run spec (plain or declarative ``kind: Run``)."""
        result: dict[str, Any] = self.call(
            "POST",
            "/v1alpha1/runs",
            to_json_value(dict(spec)),
            idempotency_key=idempotency_key,
            query={"project": self._project(project)},
        )
        return result

    def get_run(self, run_id: str, project: str | None = None) -> dict[str, Any]:
        """One run: status, progress, summaries and gates."""
        result: dict[str, Any] = self.call(
            "GET", f"/v1alpha1/runs/{_seg(run_id)}", query={"project": self._project(project)}
        )
        return result

    def list_runs(self, project: str | None = None) -> Iterator[dict[str, Any]]:
        """Every run of the project, page by page."""
        return self._paged("/v1alpha1/runs", "runs", {"project": self._project(project)})

    def get_run_results(self, run_id: str, project: str | None = None) -> Any:
        """The per-record results of a run."""
        return self.call(
            "GET",
            f"/v1alpha1/runs/{_seg(run_id)}/results",
            query={"project": self._project(project)},
        )

    def cancel_run(self, run_id: str, project: str | None = None) -> dict[str, Any]:
        """Cancels a pending or running run."""
        result: dict[str, Any] = self.call(
            "POST",
            f"/v1alpha1/runs/{_seg(run_id)}:cancel",
            query={"project": self._project(project)},
        )
        return result

    def wait_run(
        self,
        run_id: str,
        project: str | None = None,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
    ) -> dict[str, Any]:
        """Polls a run until it reaches a final status; returns it. Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id, project)
            if run.get("status") in _FINAL_RUN_STATUSES:
                return run
            if time.monotonic() >= deadline:
                raise TimeoutError(f"run {run_id} is still {run.get('status')} after {timeout} s")
            time.sleep(poll_interval)

    def delete_run(
        self,
        run_id: str,
        project: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """Deletes a finished run with its outputs and results (refused while it runs)."""
        return self.call(
            "DELETE",
            f"/v1alpha1/runs/{_seg(run_id)}",
            idempotency_key=idempotency_key,
            query={"project": self._project(project)},
        )

    # ---- datasets ---------------------------------------------------------------------------

    def upload_dataset(
        self,
        name: str,
        data: Any,
        *,
        project: str | None = None,
        format: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Uploads a dataset; returns ``{"path", "records", "sha256"}``.

        ``path`` is what a run spec's ``dataset.path`` takes. ``data`` is a file path (``.jsonl``
        or ``.parquet``), bytes, a binary file object, or rows (a list of dicts, a DataFrame, a
        Dataset), which are sent as JSONL.
        """
        body, fmt = _dataset_body(data, format)
        result: dict[str, Any] = self.call(
            "POST",
            f"/v1alpha1/datasets/{_seg(name)}/upload",
            body,
            idempotency_key=idempotency_key,
            query={"project": self._project(project), "format": fmt},
        )
        return result

    def import_dataset(
        self,
        name: str,
        uri: str,
        *,
        project: str | None = None,
        format: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Imports a dataset from the object store through ``DatasetService.ImportDataset``.

        ``uri`` must be under the dataset root's ``incoming/<project>/`` prefix. Returns
        ``{"path", "records", "sha256"}``.
        """
        fmt = format or _format_of_name(uri)
        if fmt is None:
            raise ValueError("format is needed (jsonl or parquet): the uri has no known suffix")
        config: dict[str, Any] = {"name": name, "format": fmt}
        if self._project(project) is not None:
            config["project"] = self._project(project)
        answer = self.call(
            "POST",
            "/touchstone.v1alpha1.DatasetService/ImportDataset",
            {"config": config, "uri": uri},
            idempotency_key=idempotency_key,
            headers={"Connect-Protocol-Version": "1"},
        )
        result = dict(answer or {})
        # proto3 JSON writes int64 as a string.
        result["records"] = int(result.get("records") or 0)
        return result


def _seg(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _decode(answer: Response) -> Any:
    if not answer.body:
        return None
    if "json" in (answer.header("content-type") or ""):
        return json.loads(answer.body)
    return answer.body


def _format_of_name(name: str) -> str | None:
    lowered = name.lower().split("?", 1)[0]
    if lowered.endswith(".parquet"):
        return "parquet"
    if lowered.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return None


def _dataset_body(data: Any, format: str | None) -> tuple[bytes, str]:
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        with open(path, "rb") as f:
            content = f.read()
        fmt = format or _format_of_name(path)
    elif isinstance(data, (bytes, bytearray, memoryview)):
        content = bytes(data)
        fmt = format
    elif hasattr(data, "read"):
        reader: BinaryIO = data
        content = reader.read()
        fmt = format or _format_of_name(str(getattr(data, "name", "")))
    else:
        lines = [json_text(to_json_value(dict(row))) for row in iter_rows(data)]
        content = ("\n".join(lines) + "\n").encode("utf-8")
        fmt = format or "jsonl"
    if fmt is None:
        fmt = "parquet" if content[:4] == b"PAR1" else "jsonl"
    if fmt not in ("jsonl", "parquet"):
        raise ValueError(f"format must be jsonl or parquet, not {fmt!r}")
    return content, fmt
