"""MLflow's side of bench/sdk-python.ts: the same record logged with the MLflow SDK (3.x) to a
tracking server, with MLflow's asynchronous trace logging (its default). Prints one JSON line.

usage: mlflow_bench.py TRACKING_URI CALLS RECORDS

Two equivalent calls are timed: `mlflow.log_trace(request, response, attributes)` (one call, a
trace of one span: the closest to touchstone's log()) and a `mlflow.start_span` block setting
inputs, outputs and attributes (MLflow's recommended tracing API). Export throughput is RECORDS
log_trace calls until `mlflow.flush_trace_async_logging()` returns.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
import warnings

import mlflow
from common import ANSWER, META, QUESTION, percentile


def with_span() -> None:
    with mlflow.start_span(name="log") as span:
        span.set_inputs(QUESTION)
        span.set_outputs(ANSWER)
        span.set_attributes(META)


def timed(fn, calls: int) -> list[float]:
    clock = time.perf_counter_ns
    out = []
    done = 0
    while done < calls:
        for _ in range(min(500, calls - done)):
            start = clock()
            fn()
            out.append((clock() - start) / 1000)
        done += 500
        mlflow.flush_trace_async_logging()
    return out


def main() -> None:
    uri, calls, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bench-sdk-python")

    def log_trace() -> None:
        mlflow.log_trace(name="log", request=QUESTION, response=ANSWER, attributes=META)

    for _ in range(50):
        log_trace()
    mlflow.flush_trace_async_logging()
    log_trace_us = timed(log_trace, calls)
    span_us = timed(with_span, calls)

    started = time.perf_counter()
    for _ in range(records):
        log_trace()
    mlflow.flush_trace_async_logging()
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "version": mlflow.__version__,
                "log_trace_p50_us": percentile(log_trace_us, 50),
                "log_trace_p99_us": percentile(log_trace_us, 99),
                "log_trace_mean_us": statistics.fmean(log_trace_us),
                "span_p50_us": percentile(span_us, 50),
                "span_p99_us": percentile(span_us, 99),
                "records": records,
                "seconds": seconds,
                "records_per_s": records / seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
