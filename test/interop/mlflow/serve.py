"""Runs `mlflow server` for a test and makes sure it stops by itself.

Usage: python serve.py <port> <work-dir> <max-seconds>

Starts the server on 127.0.0.1:<port> with a SQLite backend and a local artifact store under
<work-dir>, in its own process group, and prints that group's id on stdout. The whole group is
stopped when stdin closes (the test process ended or died), after <max-seconds>, or on SIGTERM;
then <work-dir> is removed.
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from supervise import stop_requested, supervise_group  # noqa: E402 (test/interop/supervise.py)


def main():
    port, work_dir, max_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    env = dict(os.environ)
    # No background job runner (huey consumers): only the REST API is needed.
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", "sqlite:///" + os.path.join(work_dir, "mlflow.db"),
            "--artifacts-destination", os.path.join(work_dir, "artifacts"),
            "--host", "127.0.0.1",
            "--port", port,
            "--workers", "1",
        ],
        cwd=work_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    print(server.pid, flush=True)

    supervise_group(server, stop_requested(max_seconds))
    # The work dir is the server's alone (database, artifacts): gone with it.
    shutil.rmtree(work_dir, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
