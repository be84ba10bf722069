"""Runs `phoenix serve` for a test and makes sure it stops by itself.

Usage: python serve.py <port> <work-dir> <max-seconds>

Starts Phoenix on 127.0.0.1:<port> with its SQLite database in <work-dir> (PHOENIX_WORKING_DIR),
in its own process group, and prints that group's id on stdout. Authentication is on when the
caller sets PHOENIX_ENABLE_AUTH/PHOENIX_SECRET/PHOENIX_ADMIN_SECRET in the environment. Phoenix's
OTLP/gRPC listener binds every interface with no setting to change that, so it is switched off
(the same patch as bench/peers/phoenix.ts; OTLP/HTTP on <port> is all the tests use). The whole
group is stopped when stdin closes (the test process ended or died), after <max-seconds>, or on
SIGTERM; then <work-dir> is removed.
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from supervise import stop_requested, supervise_group  # noqa: E402 (test/interop/supervise.py)

LAUNCHER = """
import sys
import phoenix.server.grpc_server as grpc_server

async def _grpc_disabled(self):
    return None

grpc_server.GrpcServer.__aenter__ = _grpc_disabled
from phoenix.server.main import main
sys.argv = ["phoenix", "serve"]
sys.exit(main())
"""


def main():
    port, work_dir, max_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    # Nothing from the caller's own Phoenix settings (a PostgreSQL URL, another port) leaks in,
    # except the auth settings the harness passes on purpose.
    keep = {"PHOENIX_ENABLE_AUTH", "PHOENIX_SECRET", "PHOENIX_ADMIN_SECRET"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHOENIX_") or k in keep}
    env.update(
        {
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": port,
            "PHOENIX_WORKING_DIR": work_dir,
            # Unused (gRPC is off), but never the default 4317 of a real collector.
            "PHOENIX_GRPC_PORT": str(int(port) + 1 if int(port) < 65535 else int(port) - 1),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_LOGGING_LEVEL": "warning",
            "PHOENIX_DB_LOGGING_LEVEL": "warning",
            "PHOENIX_LOG_MIGRATIONS": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    server = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        cwd=work_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    print(server.pid, flush=True)

    supervise_group(server, stop_requested(max_seconds))
    # The work dir is the server's alone (its SQLite database): gone with it.
    shutil.rmtree(work_dir, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
