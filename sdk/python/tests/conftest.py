"""Shared fixtures: the real server under test, and small local servers standing between it and
the SDK (forwarding, failing, hanging, terminating TLS) to produce the conditions under test.

The server is started by test/interop/sdk-python.int.test.ts from the same checkout, which passes:
TOUCHSTONE_TEST_URL, TOUCHSTONE_TEST_PROJECT, TOUCHSTONE_TEST_INGEST_KEY,
TOUCHSTONE_TEST_VIEWER_KEY, TOUCHSTONE_TEST_ADMIN_KEY, TOUCHSTONE_TEST_DATA_DIR. Tests needing it
are skipped without them (the pure unit tests still run).
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


@dataclass(frozen=True)
class Server:
    url: str
    project: str
    ingest_key: str
    viewer_key: str
    admin_key: str
    data_dir: str

    def get(self, path: str, key: str | None = None) -> tuple[int, Any]:
        req = urllib.request.Request(
            self.url + path, headers={"authorization": f"Bearer {key or self.viewer_key}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return res.status, json.loads(res.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")

    def trace(self, trace_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The stored trace once the server has completed it."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.get(f"/v1alpha1/traces/{trace_id}")
            if status == 200:
                return body  # type: ignore[no-any-return]
            if time.monotonic() > deadline:
                raise AssertionError(f"trace {trace_id} not stored after {timeout} s ({status})")
            time.sleep(0.1)

    def has_trace(self, trace_id: str) -> bool:
        return self.get(f"/v1alpha1/traces/{trace_id}")[0] == 200


@pytest.fixture(scope="session")
def server() -> Server:
    url = os.environ.get("TOUCHSTONE_TEST_URL")
    if not url:
        pytest.skip(
            "TOUCHSTONE_TEST_URL is not set (run through test/interop/sdk-python.int.test.ts)"
        )
    return Server(
        url=url,
        project=os.environ["TOUCHSTONE_TEST_PROJECT"],
        ingest_key=os.environ["TOUCHSTONE_TEST_INGEST_KEY"],
        viewer_key=os.environ["TOUCHSTONE_TEST_VIEWER_KEY"],
        admin_key=os.environ["TOUCHSTONE_TEST_ADMIN_KEY"],
        data_dir=os.environ.get("TOUCHSTONE_TEST_DATA_DIR", ""),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- an HTTP proxy in front of the server ----------------------------------------------------


@dataclass
class Exchange:
    """One request as the proxy saw it."""

    path: str
    body: bytes
    status: int


Behaviour = Callable[["ProxyHandler", bytes], "tuple[int, dict[str, str], bytes] | bytes | None"]


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy  # type: ignore[assignment]

    def log_message(self, *_: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        proxy = self.server
        outcome = proxy.behaviour(self, body) if proxy.behaviour else None
        if isinstance(outcome, tuple):
            status, headers, answer = outcome
        else:
            forwarded = outcome if isinstance(outcome, bytes) else body
            status, headers, answer = proxy.forward(self, forwarded)
        proxy.exchanges.append(Exchange(self.path, body, status))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class Proxy(http.server.ThreadingHTTPServer):
    """Forwards to the real server, unless ``behaviour`` answers itself (a (status, headers,
    body) tuple) or rewrites the request body (bytes)."""

    daemon_threads = True

    def __init__(self, upstream: str, port: int = 0, behaviour: Behaviour | None = None) -> None:
        super().__init__(("127.0.0.1", port), ProxyHandler)
        self.upstream = urllib.parse.urlsplit(upstream)
        self.behaviour = behaviour
        self.exchanges: list[Exchange] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def forward(self, handler: ProxyHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        keep = ("content-type", "content-encoding", "authorization")
        headers = {k: v for k, v in handler.headers.items() if k.lower() in keep}
        conn.request(handler.command, handler.path, body=body, headers=headers)
        res = conn.getresponse()
        data = res.read()
        out = {k: v for k, v in res.getheaders() if k.lower() in ("content-type", "retry-after")}
        conn.close()
        return res.status, out, data

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def proxy_factory(server: Server) -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []

    def make(behaviour: Behaviour | None = None, port: int = 0) -> Proxy:
        p = Proxy(server.url, port, behaviour)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()


class Blackhole:
    """Accepts connections and reads requests but never answers: exports stay in flight."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    hole = Blackhole()
    yield hole
    hole.close()


# ---- TLS in front of the server ------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A self-signed CA and a server certificate for localhost / 127.0.0.1 it signed."""
    d = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    try:
        openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=touchstone test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost",
        )  # fmt: skip
        (d / "ext.cnf").write_text(
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        )
        openssl(
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
        )  # fmt: skip
    except FileNotFoundError:
        if os.environ.get("CI"):
            pytest.fail("the openssl command is needed for the TLS tests")
        pytest.skip("the openssl command is not installed")
    return Certificates(d / "ca.pem", d / "server.pem", d / "server.key")


class TlsTerminator:
    """TLS in front of a plain TCP server: what a load balancer or ingress does."""

    def __init__(self, upstream: str, certs: Certificates) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(certs.cert, certs.key)
        self.certs = certs
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"https://localhost:{self.sock.getsockname()[1]}"
        self.handshake_failures = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            self.handshake_failures += 1
            raw.close()
            return
        up = socket.create_connection(self.upstream)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(up, tls), daemon=True).start()
        pump(tls, up)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def tls_server(server: Server, certificates: Certificates) -> Iterator[TlsTerminator]:
    t = TlsTerminator(server.url, certificates)
    yield t
    t.close()


def run_python(
    code: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Runs a Python snippet in a fresh interpreter with the SDK importable."""
    full_env = {**os.environ, "PYTHONPATH": SRC, **env}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
