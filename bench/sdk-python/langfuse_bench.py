"""Langfuse's side of bench/sdk-python.ts: the same record logged with Langfuse's Python SDK (v3+,
built on OpenTelemetry: a BatchSpanProcessor whose OTLP/HTTP exporter posts gzip'd protobuf to
`<base_url>/api/public/otel/v1/traces`). Langfuse's server cannot run here, so base_url is the
bench's sink, which answers 200 at once and counts the spans it receives. Prints one JSON line.

usage: langfuse_bench.py BASE_URL CALLS RECORDS

1. Caller-side cost of one record: a `start_as_current_observation` block with input, output and
   metadata (Langfuse's API for a span with its payload), CALLS blocks timed one by one, in bursts
   of 500 followed by an (untimed) flush, as sdk_bench.py times touchstone's log().
2. Sustained export: RECORDS blocks as fast as the caller can make them, timed until flush()
   returns; the sink's count says how many arrived (the SDK's queue drops spans when full).
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time

import langfuse
from common import ANSWER, META, QUESTION, percentile
from langfuse import Langfuse


def main() -> None:
    base_url, calls, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    logging.getLogger("langfuse").setLevel(logging.ERROR)
    # Placeholder keys: the sink checks none.
    client = Langfuse(public_key="pk-lf-bench", secret_key="sk-lf-bench", base_url=base_url)

    def record() -> None:
        with client.start_as_current_observation(
            name="log", input=QUESTION, output=ANSWER, metadata=META
        ):
            pass

    for _ in range(200):
        record()
    client.flush()

    clock = time.perf_counter_ns
    timings: list[float] = []
    done = 0
    while done < calls:
        for _ in range(min(500, calls - done)):
            start = clock()
            record()
            timings.append((clock() - start) / 1000)
        done += 500
        client.flush()

    started = time.perf_counter()
    for _ in range(records):
        record()
    client.flush()
    seconds = time.perf_counter() - started
    client.shutdown()
    print(
        json.dumps(
            {
                "version": langfuse.__version__,
                "span_p50_us": percentile(timings, 50),
                "span_p99_us": percentile(timings, 99),
                "span_mean_us": statistics.fmean(timings),
                "warmup_records": 200 + len(timings),
                "records": records,
                "seconds": seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
