"""What the interop servers' serve.py scripts share: they stop by themselves.

A test starts ``serve.py`` with a pipe on its stdin. The server is stopped when that pipe closes
(the test process ended or died), on SIGTERM or SIGINT, or after a maximum number of seconds,
so no server outlives its test.
"""

import os
import signal
import subprocess
import sys
import threading


def stop_requested(max_seconds):
    """An event set when stdin closes, on SIGTERM/SIGINT, or after ``max_seconds``."""
    requested = threading.Event()

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except OSError:
            pass
        requested.set()

    signal.signal(signal.SIGTERM, lambda *_: requested.set())
    signal.signal(signal.SIGINT, lambda *_: requested.set())
    threading.Thread(target=watch_stdin, daemon=True).start()
    timer = threading.Timer(max_seconds, requested.set)
    timer.daemon = True
    timer.start()
    return requested


def supervise_group(server, requested):
    """Waits until a stop is requested or ``server`` exits, then ends its whole process group.

    ``server`` was started with ``start_new_session=True``: SIGTERM, then SIGKILL, and a last
    SIGKILL for children that outlived the main process.
    """
    while not requested.wait(0.5):
        if server.poll() is not None:
            break
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
