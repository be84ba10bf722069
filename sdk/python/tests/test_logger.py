"""The logger against the real server: futures, stored records, batches, failures, fork, TLS."""

from __future__ import annotations

import json
import math
import secrets
import threading
import time
from concurrent.futures import wait
from typing import Any

import pytest

import touchstone
from touchstone import (
    ExportError,
    FlushError,
    Logger,
    QueueFullError,
    RecordRejectedError,
    RecordTooLargeError,
)

from .conftest import (
    Blackhole,
    Proxy,
    ProxyHandler,
    Server,
    TlsTerminator,
    free_port,
    run_python,
)


def logger_for(server: Server, **options: Any) -> Logger:
    return Logger(server.url, server.ingest_key, **options)


class DuckTensor:
    """The tensor protocol the SDK relies on (detach → cpu → tolist), as torch tensors have it."""

    def __init__(self, values: list[Any], device: str = "cuda:0", grad: bool = True) -> None:
        self.values = values
        self.device = device
        self.requires_grad = grad
        self.calls: list[str] = []

    def detach(self) -> DuckTensor:
        self.calls.append("detach")
        return DuckTensor(self.values, self.device, False)

    def cpu(self) -> DuckTensor:
        self.calls.append("cpu")
        return DuckTensor(self.values, "cpu", self.requires_grad)

    def tolist(self) -> list[Any]:
        if self.device != "cpu" or self.requires_grad:
            raise RuntimeError("tolist() on a tensor that is on the GPU or requires grad")
        return self.values


def test_futures_resolve_to_stored_trace_ids_with_every_field(server: Server) -> None:
    lg = logger_for(server, labels={"team": "search", "split": "train"}, service_name="sdk-tests")
    fut = lg.log(
        {"question": "Capital of France?"},
        "Paris",
        {
            "epoch": 3,
            "loss": float("nan"),
            "best": float("inf"),
            "worst": -math.inf,
            "touchstone.internal": "ignored",
        },
        reference="paris",
        context=["France is in Europe.", "Paris is its capital."],
        labels={"split": "eval"},
    )
    lg.flush(30)
    trace_id = fut.result(timeout=0)
    assert len(trace_id) == 32
    got = server.trace(trace_id)
    record = got["record"]
    assert got["trace"]["project"] == server.project
    assert got["trace"]["service"] == "sdk-tests"
    assert record["input"] == {"question": "Capital of France?"}
    assert record["output"] == "Paris"
    assert record["reference"] == "paris"
    assert record["context"] == ["France is in Europe.", "Paris is its capital."]
    meta = record["metadata"]
    assert (meta["epoch"], meta["loss"], meta["best"], meta["worst"]) == (
        3,
        "NaN",
        "Infinity",
        "-Infinity",
    )
    assert "touchstone.internal" not in meta
    assert record["labels"] == {"team": "search", "split": "eval"}
    lg.close()


def test_generated_trace_ids_are_time_ordered_and_unique(server: Server) -> None:
    lg = logger_for(server)
    before = time.time_ns() // 1_000_000
    futures = [lg.log(f"q{i}", f"a{i}") for i in range(200)]
    lg.flush(30)
    after = time.time_ns() // 1_000_000
    ids = [f.result(timeout=0) for f in futures]
    assert len(set(ids)) == len(ids)
    stamps = []
    for trace_id in ids:
        assert len(trace_id) == 32
        assert trace_id == trace_id.lower()
        assert int(trace_id, 16) != 0
        stamps.append(int(trace_id[:12], 16))
    assert stamps == sorted(stamps)
    assert before <= stamps[0]
    assert stamps[-1] <= after
    assert server.trace(ids[-1])["record"]["output"] == "a199"
    lg.close()


def test_module_level_helpers_and_a_supplied_trace_id(server: Server) -> None:
    trace_id = secrets.token_hex(16)
    touchstone.init(server.url, server.ingest_key)
    try:
        fut = touchstone.log("2+2?", 4, trace_id=trace_id)
        touchstone.flush(30)
        assert fut.result(timeout=0) == trace_id
        assert server.trace(trace_id)["record"]["output"] == 4
    finally:
        touchstone.close()


def test_tensors_arrays_and_scalars_are_converted(server: Server) -> None:
    np = pytest.importorskip("numpy")
    tensor = DuckTensor([[0.5, 1.5]])
    lg = logger_for(server)
    fut = lg.log(
        np.array([1, 2, 3]),
        tensor,
        {"score": np.float32(0.25), "steps": np.int64(7), "bad": np.float64("nan")},
    )
    lg.flush(30)
    assert tensor.calls == ["detach"]  # then cpu() and tolist() on the detached copy
    record = server.trace(fut.result(timeout=0))["record"]
    assert record["input"] == [1, 2, 3]
    assert record["output"] == [[0.5, 1.5]]
    assert record["metadata"]["score"] == 0.25
    assert record["metadata"]["steps"] == 7
    assert record["metadata"]["bad"] == "NaN"
    lg.close()


def test_log_batch_from_a_pandas_dataframe(server: Server) -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    df = pd.DataFrame(
        {
            "input": ["a?", "b?", "c?"],
            "output": ["A", "B", "C"],
            "reference": ["A", np.nan, "C"],
            "epoch": [1, 2, 3],
            "lr": [0.1, np.inf, 0.3],
        }
    )
    lg = logger_for(server)
    futures = lg.log_batch(df)
    lg.flush(30)
    ids = [f.result(timeout=0) for f in futures]
    records = [server.trace(i)["record"] for i in ids]
    assert [r["input"] for r in records] == ["a?", "b?", "c?"]
    assert records[0]["reference"] == "A"
    assert "reference" not in records[1]  # a missing cell is no reference, not "NaN"
    assert [r["metadata"]["epoch"] for r in records] == [1, 2, 3]
    assert records[1]["metadata"]["lr"] == "Infinity"
    lg.close()


def test_log_batch_from_a_hugging_face_dataset_and_a_generator(server: Server) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(
        [
            {"input": "q1", "output": "a1", "labels": {"source": "hf"}},
            {"input": "q2", "output": "a2", "labels": {"source": "hf"}},
        ]
    )
    lg = logger_for(server)
    futures = lg.log_batch(ds)
    futures += lg.log_batch({"input": f"g{i}", "output": i} for i in range(3))
    lg.flush(30)
    records = [server.trace(f.result(timeout=0))["record"] for f in futures]
    assert [r["input"] for r in records] == ["q1", "q2", "g0", "g1", "g2"]
    assert records[0]["labels"] == {"source": "hf"}
    assert records[4]["output"] == 2
    lg.close()


def test_bad_input_raises_at_the_call_naming_the_limit(server: Server) -> None:
    lg = logger_for(server)
    with pytest.raises(ValueError, match="256 keys"):
        lg.log("i", "o", {f"k{i}": i for i in range(257)})
    with pytest.raises(ValueError, match="128 characters"):
        lg.log("i", "o", {"k" * 129: 1})
    with pytest.raises(ValueError, match="65536 bytes"):
        lg.log("i", "o", {"big": "x" * 70_000})
    # Reserved keys do not count against the limit.
    lg.log("i", "o", {**{f"k{i}": i for i in range(256)}, "touchstone.x": 1})
    for bad in ("0" * 32, "ABCDEF" * 5 + "ab", "abc", 12, "g" * 32):
        with pytest.raises(ValueError, match="32-character lowercase hexadecimal"):
            lg.log("i", "o", trace_id=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="row 1: a row needs an input or an output"):
        lg.log_batch([{"input": "ok"}, {"metadata": {}}])
    lg.flush(30)  # the valid row of the refused batch was not queued either: nothing fails
    lg.close()


def test_overflow_fails_the_new_record_at_once_and_memory_stays_bounded(
    blackhole: Blackhole,
) -> None:
    lg = Logger(blackhole.url, timeout=1, max_retries=0)
    accepted = [lg.log("in", "out") for _ in range(1024)]
    started = time.perf_counter()
    overflow = lg.log("in", "out")
    elapsed = time.perf_counter() - started
    assert elapsed < 0.05, "log() must not block when the queue is full"
    assert isinstance(overflow.exception(timeout=0), QueueFullError)
    assert "queue is full" in str(overflow.exception(timeout=0))
    assert not any(f.done() for f in accepted[:512])  # in flight to a server that never answers
    with pytest.raises(FlushError) as closed:
        lg.close(timeout=0.5)
    assert closed.value.failures["dropped: the queue was full"] == 1

    big = Logger(blackhole.url, timeout=1, max_retries=0)
    mib = "x" * (1024 * 1024)
    results = [big.log(mib, "o") for _ in range(9)]
    assert sum(isinstance(f.exception(timeout=0) if f.done() else None, QueueFullError)
               for f in results) == 2  # fmt: skip
    too_large = big.log("x" * (9 * 1024 * 1024), "o")
    assert isinstance(too_large.exception(timeout=0), RecordTooLargeError)
    with pytest.raises(FlushError):
        big.close(timeout=0.5)


def test_two_batches_in_flight_and_flush_waits_for_both(server: Server, proxy_factory: Any) -> None:
    # The first batch's request is held back: the second batch goes out on the other
    # connection meanwhile, is answered first, and flush() still waits for the first. The first
    # batch is told by its content, not by arriving first: the two exporting threads race to the
    # proxy, and a loaded machine may let the second one arrive first.
    arrivals: list[float] = []
    release = threading.Event()

    def hold_first(handler: ProxyHandler, body: bytes) -> None:
        arrivals.append(time.monotonic())
        if b"first 0" in body:
            release.wait(10)

    proxy: Proxy = proxy_factory(hold_first)
    lg = Logger(proxy.url, server.ingest_key, batch_size=5, max_in_flight=2)
    first = [lg.log(f"first {i}", "o") for i in range(5)]
    second = [lg.log(f"second {i}", "o") for i in range(5)]
    wait(second, timeout=10)
    assert all(f.result(timeout=0) for f in second)
    assert len(arrivals) == 2
    assert not any(f.done() for f in first)
    flushed = threading.Thread(target=lg.flush, args=(30,))
    flushed.start()
    flushed.join(0.3)
    assert flushed.is_alive(), "flush returned while the first batch was in flight"
    release.set()
    flushed.join(30)
    assert all(f.done() for f in first)
    assert server.trace(first[0].result())["record"]["input"] == "first 0"
    with pytest.raises(ValueError, match="max_in_flight"):
        Logger(proxy.url, max_in_flight=5)
    lg.close()


def test_server_down_then_up(server: Server, proxy_factory: Any) -> None:
    port = free_port()
    lg = Logger(f"http://127.0.0.1:{port}", server.ingest_key, retry_backoff=0.2, max_retries=20)
    futures = [lg.log(f"while down {i}", "o") for i in range(5)]
    time.sleep(1.5)
    assert not any(f.done() for f in futures), "records wait (retrying) while the server is down"
    proxy_factory(port=port)
    _, pending = wait(futures, timeout=30)
    assert not pending
    for f in futures:
        assert server.trace(f.result())["record"]["input"].startswith("while down")
    lg.flush(30)  # nothing failed, so nothing to report
    lg.close()


def test_http_failure_fails_the_batch_and_flush_reports_it_once(
    server: Server, proxy_factory: Any
) -> None:
    proxy: Proxy = proxy_factory(lambda h, b: (503, {"Retry-After": "0"}, b""))
    lg = Logger(proxy.url, server.ingest_key, max_retries=2, retry_backoff=0.01)
    futures = [lg.log("i", "o") for _ in range(3)]
    with pytest.raises(FlushError) as flushed:
        lg.flush(30)
    assert flushed.value.failed == 3
    assert "HTTP 503" in str(flushed.value)
    for f in futures:
        err = f.exception(timeout=0)
        assert isinstance(err, ExportError)
        assert err.status == 503
    assert len(proxy.exchanges) == 3  # the first try and two retries
    lg.flush(30)  # reported once: the next flush has nothing to say
    lg.close()

    bad_key = Logger(server.url, "tsk_not_a_key", max_retries=5)
    refused = bad_key.log("i", "o")
    with pytest.raises(FlushError, match="HTTP 401"):
        bad_key.flush(30)
    assert isinstance(refused.exception(timeout=0), ExportError)
    bad_key.close()


def test_retry_after_is_honoured(server: Server, proxy_factory: Any) -> None:
    calls = {"n": 0}

    def first_busy(_h: ProxyHandler, _b: bytes) -> tuple[int, dict[str, str], bytes] | None:
        calls["n"] += 1
        return (503, {"Retry-After": "1"}, b"") if calls["n"] == 1 else None

    proxy: Proxy = proxy_factory(first_busy)
    lg = Logger(proxy.url, server.ingest_key, retry_backoff=0.01)
    started = time.monotonic()
    fut = lg.log("busy", "o")
    trace_id = fut.result(timeout=30)
    assert time.monotonic() - started >= 1.0
    assert server.trace(trace_id)["record"]["input"] == "busy"
    lg.close()


def test_partial_rejection_fails_exactly_the_refused_records(
    server: Server, proxy_factory: Any
) -> None:
    doomed = secrets.token_hex(16)

    def zero_span_id(_h: ProxyHandler, body: bytes) -> bytes:
        # A span starts with its trace id (field 1) then its span id (field 2, 8 bytes).
        at = body.find(b"\x0a\x10" + bytes.fromhex(doomed) + b"\x12\x08")
        assert at >= 0
        start = at + 2 + 16 + 2
        return body[:start] + bytes(8) + body[start + 8 :]

    proxy: Proxy = proxy_factory(zero_span_id)
    lg = Logger(proxy.url, server.ingest_key, flush_interval=0.5)
    before = lg.log("kept 1", "o")
    rejected = lg.log("refused", "o", trace_id=doomed)
    after = lg.log("kept 2", "o")
    with pytest.raises(FlushError) as flushed:
        lg.flush(30)
    assert len(proxy.exchanges) == 1  # one request, partly refused
    assert flushed.value.failures == {"refused by the server: span with an all-zero span id": 1}
    err = rejected.exception(timeout=0)
    assert isinstance(err, RecordRejectedError)
    assert err.reason == "span with an all-zero span id"
    assert server.trace(before.result(timeout=0))["record"]["input"] == "kept 1"
    assert server.trace(after.result(timeout=0))["record"]["input"] == "kept 2"
    assert not server.has_trace(doomed)
    lg.close()


def test_gzip_compression(server: Server) -> None:
    lg = logger_for(server, compression="gzip")
    fut = lg.log("compressed " * 100, "o")
    lg.flush(30)
    assert server.trace(fut.result(timeout=0))["record"]["input"].startswith("compressed")
    lg.close()


def _env(server: Server, endpoint: str | None = None) -> dict[str, str]:
    return {
        "TOUCHSTONE_OTLP_ENDPOINT": endpoint or server.url,
        "TOUCHSTONE_API_KEY": server.ingest_key,
    }


FORK_SCRIPT = """
import json, os, sys
import touchstone
from touchstone import ForkedProcessError

parent = touchstone.Logger(sys.argv[1], max_retries=0, timeout=60, exit_timeout=0)  # never answers
pending = [parent.log("parent", "o") for _ in range(3)]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    inherited = [type(f.exception(timeout=5)).__name__ for f in pending]
    own = parent.log("child via the inherited object", "o")        # a fresh queue, same target
    fut = touchstone.log("from the child", "o")                       # fresh default logger (env)
    touchstone.flush(30)
    os.write(w, json.dumps({"inherited": inherited, "trace": fut.result(),
                            "own_done": own.done()}).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 65536):
    data += chunk
os.waitpid(pid, 0)
out = json.loads(data)
out["parent_pending"] = sum(not f.done() for f in pending)
print(json.dumps(out))
"""


def test_os_fork_child_does_not_inherit_the_logger(server: Server, blackhole: Blackhole) -> None:
    run = run_python(FORK_SCRIPT.replace("sys.argv[1]", repr(blackhole.url)), _env(server))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["inherited"] == ["ForkedProcessError"] * 3
    assert out["parent_pending"] == 3  # the parent's own copies are still being sent
    assert out["own_done"] is False
    assert server.trace(out["trace"])["record"]["input"] == "from the child"


MP_SCRIPT = """
import json, multiprocessing, sys
import touchstone

touchstone.init(BLACKHOLE, max_retries=0, timeout=60)  # the parent's default: never answers
pending = [touchstone.log("parent", "o") for _ in range(2)]

def child(q):
    inherited = [type(f.exception(timeout=5)).__name__ for f in pending]
    for i in range(3):
        touchstone.log(f"mp child {i}", "o", labels={"mp": LABEL})
    # No flush: the child's records drain when the process ends (multiprocessing finalizers).
    q.put({"inherited": inherited, "endpoint": touchstone.get_logger().endpoint})

ctx = multiprocessing.get_context("fork")
q = ctx.Queue()
procs = [ctx.Process(target=child, args=(q,)) for _ in range(2)]
for p in procs:
    p.start()
results = [q.get(timeout=60) for _ in procs]
for p in procs:
    p.join(60)
print(json.dumps({"results": results, "codes": [p.exitcode for p in procs]}))
try:
    touchstone.close(timeout=0)
except touchstone.FlushError:
    pass
"""


def test_multiprocessing_fork_children_log_through_a_fresh_logger(
    server: Server, blackhole: Blackhole
) -> None:
    label = secrets.token_hex(4)
    script = MP_SCRIPT.replace("BLACKHOLE", repr(blackhole.url)).replace("LABEL", repr(label))
    run = run_python(script, _env(server))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["codes"] == [0, 0]
    for r in out["results"]:
        assert r["inherited"] == ["ForkedProcessError"] * 2
        assert r["endpoint"] == server.url + "/v1/traces"
    stored = _traces_with_label(server, "mp", label, expect=6)
    assert sorted(t["name"] for t in stored) == ["log"] * 6


def _traces_with_label(server: Server, key: str, value: str, expect: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        status, body = server.get(f"/v1alpha1/traces?labels={key}={value}&page_size=1000")
        traces = body.get("traces", []) if status == 200 else []
        if len(traces) >= expect or time.monotonic() > deadline:
            assert len(traces) == expect, f"{len(traces)} of {expect} records stored"
            return list(traces)
        time.sleep(0.2)


EXIT_SCRIPT = """
import sys, touchstone
for i in range(300):
    touchstone.log(f"exit drain {i}", "o", labels={"run": sys.argv[1]})
print("logged")
"""


def test_pending_records_drain_at_exit_without_close(server: Server) -> None:
    label = secrets.token_hex(4)
    run = run_python(EXIT_SCRIPT.replace("sys.argv[1]", repr(label)), _env(server))
    assert run.returncode == 0, run.stderr
    assert _traces_with_label(server, "run", label, expect=300)


def test_exit_drain_gives_up_after_exit_timeout(blackhole: Blackhole) -> None:
    script = (
        "import touchstone\n"
        "touchstone.init(exit_timeout=1, timeout=30)\n"
        "touchstone.log('never answered', 'o')\n"
    )
    started = time.monotonic()
    run = run_python(script, {"TOUCHSTONE_OTLP_ENDPOINT": blackhole.url})
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started < 15
    assert "close() timed out after 1.0 s" in run.stderr


TLS_SCRIPT = """
import json, touchstone
fut = touchstone.log("over tls", "o")
try:
    touchstone.flush(30)
    print(json.dumps({"trace": fut.result()}))
except touchstone.FlushError:
    print(json.dumps({"error": str(fut.exception())}))
"""


def test_tls_with_the_ca_from_ssl_cert_file(server: Server, tls_server: TlsTerminator) -> None:
    env = {**_env(server, tls_server.url), "SSL_CERT_FILE": str(tls_server.certs.ca)}
    run = run_python(TLS_SCRIPT, env)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "trace" in out, out
    assert server.trace(out["trace"])["record"]["input"] == "over tls"

    untrusted = run_python(TLS_SCRIPT, {**_env(server, tls_server.url), "SSL_CERT_FILE": ""})
    out = json.loads(untrusted.stdout.strip().splitlines()[-1])
    assert "certificate verification failed" in out["error"]
    assert tls_server.handshake_failures >= 1


def test_project_selection(server: Server) -> None:
    mine = logger_for(server, project=server.project)
    fut = mine.log("in my project", "o")
    mine.flush(30)
    assert server.trace(fut.result(timeout=0))["trace"]["project"] == server.project
    mine.close()

    other = logger_for(server, project="someone-else")
    refused = other.log("elsewhere", "o")
    with pytest.raises(FlushError, match="HTTP 403"):
        other.flush(30)
    assert isinstance(refused.exception(timeout=0), ExportError)
    other.close()


def test_secrets_in_metadata_are_redacted_before_storage(server: Server) -> None:
    lg = logger_for(server)
    fut = lg.log("i", "o", {"api_key": "sk-live-SENTINEL", "nested": {"password": "hunter2"}})
    lg.flush(30)
    stored = json.dumps(server.trace(fut.result(timeout=0))["record"])
    assert "SENTINEL" not in stored
    assert "hunter2" not in stored
    assert "[REDACTED]" in stored
    lg.close()
