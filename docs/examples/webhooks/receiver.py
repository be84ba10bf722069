"""A Touchstone webhook receiver with the Python standard library (3.10+).

Run: WEBHOOK_SECRET=whsec_... PORT=8000 python3 receiver.py
"""
import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["WEBHOOK_SECRET"].encode()
TOLERANCE_SECONDS = 300  # refuse signatures older (or newer) than five minutes
handled = set()  # delivery ids already handled; keep them in your database
lock = threading.Lock()  # requests arrive on several threads at once


def verify(raw: bytes, header: str | None) -> bool:
    """Header: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">[,v1=<another>]."""
    timestamp, signatures = None, []
    for part in (header or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value.encode())
    if timestamp is None or abs(time.time() - timestamp) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(SECRET, f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected.encode(), s) for s in signatures)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        # The raw body, verified before it is parsed.
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not verify(raw, self.headers.get("Touchstone-Signature")):
            self.send_response(400)
            self.end_headers()
            return
        delivery = self.headers["Touchstone-Delivery"]  # the same on every retry
        with lock:
            first = delivery not in handled
            handled.add(delivery)
            if first:
                event = json.loads(raw)
                print(event["type"], event["id"], flush=True)  # act on the event here
        self.send_response(204)  # any 2xx counts as delivered
        self.end_headers()

    def log_message(self, format, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Handler)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
