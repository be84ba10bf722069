"""Reads every trace of an experiment with its spans through MLflow's own Python client.

Usage: python read_traces.py <tracking-uri> <experiment-id> <page-size>

Pages through ``MlflowClient().search_traces(locations=[<experiment-id>], include_spans=True)``
in start order, as a consumer of the store reads it. Prints one JSON line: traces, spans, pages
and the seconds the reading took (the client's import and set-up excluded).
"""

import json
import sys
import time

import mlflow
from mlflow.tracking import MlflowClient


def main():
    uri, experiment_id, page_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mlflow.set_tracking_uri(uri)
    client = MlflowClient()
    traces = spans = pages = 0
    token = None
    started = time.perf_counter()
    while True:
        page = client.search_traces(
            locations=[experiment_id],
            max_results=page_size,
            order_by=["timestamp_ms ASC"],
            page_token=token,
            include_spans=True,
        )
        pages += 1
        traces += len(page)
        spans += sum(len(t.data.spans) for t in page)
        token = page.token
        if not token:
            break
    seconds = time.perf_counter() - started
    print(json.dumps({"traces": traces, "spans": spans, "pages": pages, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
