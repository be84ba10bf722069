"""The one HTTP transport of the package: a kept-alive connection per target (http.client).

TLS trusts the CA bundle named by ``SSL_CERT_FILE`` when it is set (else the system store); the
environment's proxy (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY``) is used except for loopback
targets, which a proxy could not reach.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import ipaddress
import os
import socket
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

USER_AGENT = "touchstone-sdk-python"
# Below common server keep-alive timeouts (Node's default is 5 s).
_IDLE_REDIAL_SECONDS = 4.0


def ssl_context_from_env() -> ssl.SSLContext:
    """A verifying TLS context trusting ``SSL_CERT_FILE`` when set, else the default store."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is not None or capath is not None:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context()


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class Response:
    """An HTTP answer, body read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        """A header by case-insensitive name."""
        return self.headers.get(name.lower())


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Transport:
    """Requests to one base URL over one kept-alive connection; not thread-safe (one per thread)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"expected an http:// or https:// URL, got {base_url!r}")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.base_path = parsed.path.rstrip("/")
        self.timeout = timeout
        self._ssl = ssl_context
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0
        self._proxy = self._proxy_for(parsed.scheme, self.host)

    @staticmethod
    def _proxy_for(scheme: str, host: str) -> urllib.parse.SplitResult | None:
        if _is_loopback(host):
            return None
        proxies = urllib.request.getproxies_environment()
        url = proxies.get(scheme)
        if not url or urllib.request.proxy_bypass_environment(host):  # type: ignore[attr-defined]
            return None
        proxy = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        return proxy if proxy.hostname else None

    def _connect(self) -> http.client.HTTPConnection:
        proxy = self._proxy
        if self.scheme == "https":
            context = self._ssl if self._ssl is not None else ssl_context_from_env()
            self._ssl = context
            if proxy is not None:
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    proxy.hostname or "", proxy.port or 80, timeout=self.timeout, context=context
                )
                conn.set_tunnel(self.host, self.port)
                return conn
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=context
            )
        if proxy is not None:
            return http.client.HTTPConnection(
                proxy.hostname or "", proxy.port or 80, timeout=self.timeout
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def url_path(self, path: str) -> str:
        """The request target for a path under the base URL (absolute through a plain proxy)."""
        target = self.base_path + path
        if self._proxy is not None and self.scheme == "http":
            return f"http://{self.host}:{self.port}{target}"
        return target

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        idempotent: bool = True,
    ) -> Response:
        """Sends one request and reads the whole answer.

        A kept-alive connection idle for a few seconds is redialled first (servers close idle
        ones); one the server closed anyway is redialled once more, for idempotent requests only.
        Raises OSError (including ssl.SSLError, TimeoutError) and http.client.HTTPException when
        no answer arrived.
        """
        all_headers = {"User-Agent": USER_AGENT, **(headers or {})}
        target = self.url_path(path)
        if self._conn is not None and time.monotonic() - self._last_used > _IDLE_REDIAL_SECONDS:
            self.close()
        for attempt in (0, 1):
            fresh = self._conn is None
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            try:
                conn.request(method, target, body=body, headers=all_headers)
                answer = conn.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                # Only a reused connection may have been closed by the server while idle.
                if fresh or attempt == 1 or not idempotent:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            self._last_used = time.monotonic()
            if answer.will_close:
                self.close()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
        raise ConnectionError("unreachable")  # the loop returns or raises first

    def close(self) -> None:
        """Closes the connection; the next request dials again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    def forget(self) -> None:
        """Drops the connection without touching its socket.

        A forked child must neither use nor shut down the connection of its parent.
        """
        self._conn = None


def describe_oserror(err: BaseException) -> str:
    """Short, safe text for a transport failure (no URL paths, no credentials)."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {err.verify_message or err.reason}"
    if isinstance(err, ssl.SSLError):
        return f"TLS error: {err.reason or err}"
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return "host name not resolved"
    if isinstance(err, http.client.HTTPException):
        return f"bad HTTP answer ({type(err).__name__})"
    return f"{type(err).__name__}: {err}"
