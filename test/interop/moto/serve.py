"""Runs moto's S3-compatible server for a test and makes sure it stops by itself.

Usage: python serve.py <port> <max-seconds>

Serves on 127.0.0.1:<port> in this process (moto's ThreadedMotoServer) and prints "ready" once
it answers. Signature checking is on after the first four requests (INITIAL_NO_AUTH_ACTION_COUNT,
set by the caller), which s3_admin.py's "setup" spends creating the IAM user, its policy, its
access key and the bucket. Stops when stdin closes (the test process ended or died), after
<max-seconds>, or on SIGTERM.
"""

import os
import sys

from moto.server import ThreadedMotoServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from supervise import stop_requested  # noqa: E402 (test/interop/supervise.py)


def main():
    port, max_seconds = int(sys.argv[1]), float(sys.argv[2])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print("ready", flush=True)

    stop_requested(max_seconds).wait()
    server.stop()


if __name__ == "__main__":
    main()
