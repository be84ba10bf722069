"""The API client against the real server: evaluate, webhooks, errors, idempotency, runs and
datasets."""

from __future__ import annotations

import http.server
import io
import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import touchstone
from touchstone import (
    Client,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUncertainError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TouchstoneConnectionError,
    UnauthenticatedError,
    WebhookSignatureError,
)

from .conftest import Proxy, ProxyHandler, Server, free_port


@pytest.fixture
def admin(server: Server) -> Client:
    return Client(server.url, server.admin_key)


def test_evaluate_records_from_dicts_and_a_dataframe(admin: Client) -> None:
    out = admin.evaluate(
        [{"output": "Paris", "reference": "Paris"}, {"output": "Lyon", "reference": "Paris"}],
        ["exact-match"],
    )
    passed = [r["results"][0]["scores"][0]["passed"] for r in out["results"]]
    assert passed == [True, False]

    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"output": ["4", "5"], "reference": ["4", "4"]})
    out = admin.evaluate(frame, [{"ref": "exact-match", "name": "exact"}])
    assert [r["results"][0]["evaluator"] for r in out["results"]] == ["exact", "exact"]


def test_errors_carry_the_service_code_message_and_request_id(
    server: Server, admin: Client
) -> None:
    with pytest.raises(NotFoundError) as missing:
        admin.get_webhook("no-such-hook")
    assert missing.value.status == 404
    assert missing.value.code.endswith("NOT_FOUND")
    assert missing.value.request_id
    assert "no-such-hook" in missing.value.message

    with pytest.raises(InvalidArgumentError) as invalid:
        admin.apply_webhook(name="bad", url="ftp://example.com/x")
    assert invalid.value.kind == "invalid_argument"
    assert invalid.value.details
    assert "path" in invalid.value.details[0]

    with pytest.raises(PermissionDeniedError):
        Client(server.url, server.viewer_key).list_webhooks().__next__()
    with pytest.raises(UnauthenticatedError):
        Client(server.url, "tsk_unknown").call("GET", "/v1alpha1/evaluators")
    with pytest.raises(TouchstoneConnectionError):
        Client(f"http://127.0.0.1:{free_port()}", max_retries=0).call("GET", "/healthz")


def test_generic_call(admin: Client) -> None:
    evaluators = admin.call("GET", "/v1alpha1/evaluators")
    assert any(e.get("type") == "exact-match" or e.get("name") == "exact-match"
               for e in evaluators["evaluators"])  # fmt: skip


class Receiver(http.server.ThreadingHTTPServer):
    """A webhook receiver that verifies every delivery as the docs tell users to."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.secret = ""
        self.verified: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}/hook"
        threading.Thread(target=self.serve_forever, daemon=True).start()


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    server: Receiver  # type: ignore[assignment]

    def log_message(self, *_: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            touchstone.verify_webhook_signature(
                self.server.secret, self.headers.get("Touchstone-Signature"), raw
            )
        except WebhookSignatureError as err:
            self.server.refused.append(err.reason)
            self.send_response(400)
        else:
            self.server.verified.append(json.loads(raw))
            self.send_response(204)
        self.end_headers()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.shutdown()
    r.server_close()


def test_webhook_apply_test_and_deliveries(admin: Client, receiver: Receiver) -> None:
    name = f"sdk-{secrets.token_hex(3)}"
    applied = admin.apply_webhook(name=name, url=receiver.url, events=[])
    assert applied["secret"].startswith("whsec_")
    receiver.secret = applied["secret"]
    assert "secret" not in admin.get_webhook(name)
    assert name in [w["name"] for w in admin.list_webhooks()]

    ping = admin.test_webhook(name)
    assert ping["id"].startswith("whd_")
    deadline = time.monotonic() + 30
    while not receiver.verified and time.monotonic() < deadline:
        time.sleep(0.1)
    assert receiver.verified
    assert receiver.verified[0]["type"] == "ping"
    assert receiver.refused == []
    deliveries: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        deliveries = list(admin.list_webhook_deliveries(name, page_size=1))
        if deliveries and deliveries[0]["state"] == "DELIVERED":
            break
        time.sleep(0.1)
    assert [d["id"] for d in deliveries] == [ping["id"]]
    assert deliveries[0]["state"] == "DELIVERED"
    admin.delete_webhook(name)
    with pytest.raises(NotFoundError):
        admin.get_webhook(name)


def test_verify_webhook_signature_refusals() -> None:
    secret = "whsec_" + "k" * 32
    body = b'{"type":"ping"}'
    now = 1_800_000_000
    import hashlib
    import hmac

    good = hmac.new(secret.encode(), f"{now}.".encode() + body, hashlib.sha256).hexdigest()
    Client.verify_webhook_signature(secret, f"t={now},v1={'0' * 64},v1={good}", body, now=now)
    cases = {
        "missing_header": (None, body, now),
        "malformed_header": ("v1=abc", body, now),
        "timestamp_out_of_tolerance": (f"t={now},v1={good}", body, now + 301),
        "signature_mismatch": (f"t={now},v1={good}", body + b" ", now),
    }
    for reason, (header, raw, at) in cases.items():
        with pytest.raises(WebhookSignatureError) as err:
            touchstone.verify_webhook_signature(secret, header, raw, now=at)
        assert err.value.reason == reason


def test_keyed_writes_retry_busy_answers_with_the_same_key(
    server: Server, proxy_factory: Any
) -> None:
    seen: list[str | None] = []

    def busy_once(h: ProxyHandler, _b: bytes) -> tuple[int, dict[str, str], bytes] | None:
        seen.append(h.headers.get("Idempotency-Key"))
        if len(seen) == 1:
            body = {"error": {"code": "OVERLOADED", "kind": "resource_exhausted",
                              "message": "busy", "requestId": "r1"}}  # fmt: skip
            return (
                429,
                {"Retry-After": "0", "content-type": "application/json"},
                json.dumps(body).encode(),
            )
        return None

    proxy: Proxy = proxy_factory(busy_once)
    client = Client(proxy.url, server.admin_key)
    out = client.evaluate(
        [{"output": "a", "reference": "a"}], ["exact-match"], idempotency_key="k-1"
    )
    assert out["results"][0]["results"][0]["scores"][0]["passed"] is True
    assert seen == ["k-1", "k-1"]

    seen.clear()
    with pytest.raises(ResourceExhaustedError):  # no key: not retried (it might run twice)
        client.evaluate([{"output": "a", "reference": "a"}], ["exact-match"])
    assert seen == [None]


def test_an_uncertain_outcome_raises_its_own_error_and_is_not_retried(
    server: Server, proxy_factory: Any
) -> None:
    # The service answers so only when a database fails mid-commit; the answer is replayed here.
    calls: list[str | None] = []

    def uncertain(h: ProxyHandler, _b: bytes) -> tuple[int, dict[str, str], bytes]:
        calls.append(h.headers.get("Idempotency-Key"))
        body = {
            "error": {
                "code": "IDEMPOTENCY_OUTCOME_UNCERTAIN",
                "kind": "unavailable",
                "message": "the outcome of the request is uncertain; retry with the same key",
                "requestId": "req-42",
            }
        }
        return (
            503,
            {"content-type": "application/json", "Retry-After": "1"},
            json.dumps(body).encode(),
        )

    proxy: Proxy = proxy_factory(uncertain)
    client = Client(proxy.url, server.admin_key)
    with pytest.raises(OutcomeUncertainError) as err:
        client.create_run({"name": "r"}, idempotency_key="run-key-1")
    assert err.value.idempotency_key == "run-key-1"
    assert err.value.request_id == "req-42"
    assert "same idempotency key" in str(err.value)
    assert calls == ["run-key-1"]


def test_idempotent_replay_and_conflict(admin: Client) -> None:
    key = f"eval-{secrets.token_hex(4)}"
    records = [{"output": "x", "reference": "x"}]
    first = admin.evaluate(records, ["exact-match"], idempotency_key=key)
    again = admin.evaluate(records, ["exact-match"], idempotency_key=key)
    assert again == first
    with pytest.raises(ConflictError) as conflict:
        admin.evaluate([{"output": "y", "reference": "x"}], ["exact-match"], idempotency_key=key)
    assert conflict.value.code == "IDEMPOTENCY_KEY_REUSED"


# ---- runs and datasets (REST and the DatasetService RPC) ----------------------------------


def test_upload_dataset_run_it_and_delete_the_run(server: Server, admin: Client) -> None:
    rows = [
        {"input": "2+2?", "output": "4", "reference": "4"},
        {"input": "3+3?", "output": "7", "reference": "6"},
    ]
    name = f"sdk-{secrets.token_hex(3)}"
    uploaded = admin.upload_dataset(name, rows, idempotency_key=f"up-{name}")
    assert uploaded["records"] == 2
    assert len(uploaded["sha256"]) == 64
    again = admin.upload_dataset(name, rows, idempotency_key=f"up-{name}")
    assert again == uploaded

    spec = {
        "name": name,
        "dataset": {"path": uploaded["path"]},
        "evaluators": [{"ref": "exact-match"}],
        "gates": [{"metric": "exact-match", "min": 0.4}],
    }
    created = admin.create_run(spec, idempotency_key=f"run-{name}")
    assert created["status"].startswith("RUN_STATUS_")
    assert admin.create_run(spec, idempotency_key=f"run-{name}")["id"] == created["id"]
    run = admin.wait_run(created["id"], timeout=60)
    assert run["status"] == "RUN_STATUS_SUCCEEDED"
    assert run["gates"][0]["passed"] is True
    assert admin.get_run(created["id"])["id"] == created["id"]
    admin.delete_run(created["id"], idempotency_key=f"del-{name}")
    admin.delete_run(created["id"], idempotency_key=f"del-{name}")  # replayed, not refused
    with pytest.raises(NotFoundError):
        admin.get_run(created["id"])


def test_upload_parquet_from_a_file_object_and_import_from_the_root(
    server: Server, admin: Client
) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"input": ["a", "b", "c"], "output": ["A", "B", "C"]})
    buf = io.BytesIO()
    frame.to_parquet(buf)
    buf.seek(0)
    uploaded = admin.upload_dataset(f"pq-{secrets.token_hex(3)}", buf, format="parquet")
    assert uploaded["records"] == 3

    if not server.data_dir:
        pytest.skip("TOUCHSTONE_TEST_DATA_DIR is not set")
    name = f"imp-{secrets.token_hex(3)}"
    incoming = Path(server.data_dir) / "datasets" / "incoming" / server.project
    incoming.mkdir(parents=True, exist_ok=True)
    (incoming / f"{name}.jsonl").write_text('{"input": "q", "output": "a"}\n')
    imported = admin.import_dataset(
        name, f"incoming/{server.project}/{name}.jsonl", idempotency_key=f"imp-{name}"
    )
    assert imported["records"] == 1
    assert imported["path"]
    with pytest.raises(InvalidArgumentError):
        admin.import_dataset(name, "incoming/another-project/x.jsonl")
