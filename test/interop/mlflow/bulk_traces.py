"""Loads many agent traces into a live MLflow server, fast, for bench/source-mlflow.ts.

Usage: python bulk_traces.py <tracking-uri> <experiment-name> <count> <first-start-ms> <spacing-ms>

One agent trace is made with the MLflow SDK (make_traces.py's: a CHAIN root, two CHAT_MODEL spans
with chat messages and token usage, tool ``get_weather`` and tool ``get_time``, which raises) in
the experiment ``<experiment-name>-template``. Its spans are then copied ``count`` times, each
copy with new trace and span ids, trace ``i`` starting at ``first-start-ms + i * spacing-ms``, and
every third copy's ``get_time`` call succeeding; the copies go to ``<experiment-name>`` through
MLflow's own OTLP ingest (``POST /v1/traces``, protobuf, the ``x-mlflow-experiment-id`` header;
the SDK's ``log_spans``), 100 traces per request, 2 requests in flight. The server derives each trace's info (start,
duration, state OK, spans location TRACKING_STORE) from its spans, as for any OTLP exporter.

Prints one JSON line: the experiment id, the count, and the seconds the copies took to load.
"""

import base64
import copy
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"

import mlflow  # noqa: E402
from make_traces import QUESTION, travel_agent  # noqa: E402  (same directory)
from mlflow.entities import Span  # noqa: E402
from mlflow.tracing.constant import SpanAttributeKey  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

TRACES_PER_REQUEST = 100
IN_FLIGHT = 2


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def main():
    uri, experiment, count, first_ms, spacing_ms = sys.argv[1:6]
    count, first_ms, spacing_ms = int(count), int(first_ms), float(spacing_ms)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment + "-template")
    travel_agent(QUESTION)
    client = MlflowClient()
    template = client.get_trace(mlflow.get_last_active_trace_id())
    spans = [s.to_dict() for s in template.data.spans]
    t0 = min(int(s["start_time_unix_nano"]) for s in spans)
    experiment_id = mlflow.set_experiment(experiment).experiment_id
    store = client._tracing_client.store

    pool = ThreadPoolExecutor(IN_FLIGHT)
    futures = []
    started = time.perf_counter()
    batch: list[Span] = []
    for i in range(count):
        trace_raw = os.urandom(16)
        request_id = json.dumps("tr-" + trace_raw.hex())
        ids = {s["span_id"]: b64(os.urandom(8)) for s in spans}
        shift = first_ms * 1_000_000 + int(i * spacing_ms * 1_000_000) - t0
        for s in spans:
            d = copy.deepcopy(s)
            d["trace_id"] = b64(trace_raw)
            d["span_id"] = ids[s["span_id"]]
            d["parent_span_id"] = ids.get(s["parent_span_id"], "") if s["parent_span_id"] else ""
            d["start_time_unix_nano"] = int(s["start_time_unix_nano"]) + shift
            d["end_time_unix_nano"] = int(s["end_time_unix_nano"]) + shift
            d["attributes"][SpanAttributeKey.REQUEST_ID] = request_id
            for event in d.get("events", []):
                event["time_unix_nano"] = int(event["time_unix_nano"]) + shift
            if i % 3 == 0 and d["name"] == "get_time":
                d["status"] = {"code": "STATUS_CODE_OK", "message": ""}
                d["events"] = []
                d["attributes"][SpanAttributeKey.OUTPUTS] = json.dumps({"tz": "Europe/Paris", "time": "12:00"})
            batch.append(Span.from_dict(d))
        if (i + 1) % TRACES_PER_REQUEST == 0 or i + 1 == count:
            futures.append(pool.submit(store.log_spans, experiment_id, batch))
            batch = []
            if len(futures) > 2 * IN_FLIGHT:
                futures.pop(0).result()
    for f in futures:
        f.result()
    seconds = time.perf_counter() - started
    print(json.dumps({"experiment_id": experiment_id, "count": count, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
