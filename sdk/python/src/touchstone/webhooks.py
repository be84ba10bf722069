"""Verifying Touchstone webhook deliveries on the receiving side."""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from .errors import WebhookSignatureError

_HEX_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_UNIX_SECONDS = re.compile(r"^\d{1,12}$")


def verify_webhook_signature(
    secret: str | bytes,
    header: str | None,
    raw_body: str | bytes,
    tolerance: float = 300,
    *,
    now: float | None = None,
) -> None:
    """Checks the ``Touchstone-Signature`` header of a delivery; raises unless it is valid.

    The header is ``t=<unix seconds>,v1=<hex>`` where the hex is the HMAC-SHA256 of
    ``<t>.<raw body>`` keyed with the webhook's secret; several ``v1=`` values may appear while a
    secret rotates, and one match is enough. Verify the body exactly as received, before parsing
    it. The comparison is constant-time, and a timestamp more than ``tolerance`` seconds from now
    is refused, so an old delivery cannot be replayed.

    Raises:
        WebhookSignatureError: with ``reason`` ``missing_header``, ``malformed_header``,
            ``timestamp_out_of_tolerance`` or ``signature_mismatch``.
    """
    if header is None or not header.strip():
        raise WebhookSignatureError("missing_header", "no Touchstone-Signature header")
    timestamp: int | None = None
    candidates: list[bytes] = []
    for part in header.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            continue
        if key == "t" and _UNIX_SECONDS.match(value):
            timestamp = int(value)
        elif key == "v1" and _HEX_SHA256.match(value):
            candidates.append(bytes.fromhex(value))
    if timestamp is None or not candidates:
        raise WebhookSignatureError(
            "malformed_header",
            "Touchstone-Signature needs t=<unix seconds> and at least one v1=<hex>",
        )
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookSignatureError(
            "timestamp_out_of_tolerance",
            f"the signature timestamp is more than {tolerance:g} s away from now",
        )
    key_bytes = secret.encode("utf-8") if isinstance(secret, str) else secret
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else raw_body
    expected = hmac.new(key_bytes, f"{timestamp}.".encode() + body, hashlib.sha256).digest()
    # Every candidate is compared (no early exit), so timing says nothing about which matched.
    matched = False
    for candidate in candidates:
        matched = hmac.compare_digest(candidate, expected) or matched
    if not matched:
        raise WebhookSignatureError("signature_mismatch", "no v1 signature matches the payload")
