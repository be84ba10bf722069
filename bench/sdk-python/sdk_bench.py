"""The Python logging SDK's side of bench/sdk-python.ts: prints one JSON line of figures.

usage: sdk_bench.py ENDPOINT CALLS RECORDS

1. Caller-side cost of log(): CALLS calls timed one by one, in bursts of 500 followed by an
   (untimed) flush, so the queue never fills and the export thread runs as it does in use.
2. Caller-side cost of log_batch() per row (a list of 1000 dicts).
3. Sustained export: RECORDS records logged as fast as the queue takes them (a record refused
   with QueueFullError is retried after 1 ms), timed until the last future resolved.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import touchstone
from common import ANSWER, META, QUESTION, percentile


def main() -> None:
    endpoint, calls, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    logger = touchstone.Logger(endpoint)
    first_record = time.perf_counter()
    # Warm-up: first calls pay for imports and the thread start.
    for _ in range(200):
        logger.log(QUESTION, ANSWER, META)
    logger.flush(60)

    timings: list[float] = []
    clock = time.perf_counter_ns
    log = logger.log
    done = 0
    while done < calls:
        for _ in range(min(500, calls - done)):
            start = clock()
            log(QUESTION, ANSWER, META)
            timings.append((clock() - start) / 1000)
        done += 500
        logger.flush(60)

    rows = [{"input": QUESTION, "output": ANSWER, "metadata": META} for _ in range(1000)]
    batch_us = []
    for _ in range(5):
        start = clock()
        logger.log_batch(rows)
        batch_us.append((clock() - start) / 1000 / len(rows))
        logger.flush(60)

    retries = 0
    futures = []
    started = time.perf_counter()
    warmup_records = 200 + len(timings) + 5 * len(rows)
    sent = 0
    while sent < records:
        future = log(QUESTION, ANSWER, META)
        if future.done() and isinstance(future.exception(), touchstone.QueueFullError):
            retries += 1
            time.sleep(0.001)
            continue
        futures.append(future)
        sent += 1
    failed = 0
    for future in futures:
        if future.exception(timeout=300) is not None:
            failed += 1
    seconds = time.perf_counter() - started
    try:
        logger.close(60)
    except touchstone.FlushError:
        pass
    print(
        json.dumps(
            {
                "calls": len(timings),
                "log_p50_us": percentile(timings, 50),
                "log_p99_us": percentile(timings, 99),
                "log_mean_us": statistics.fmean(timings),
                "log_batch_us_per_row": statistics.median(batch_us),
                "records": records,
                "failed": failed,
                "seconds": seconds,
                "records_per_s": (records - failed) / seconds,
                "queue_full_retries": retries,
                "warmup_records": warmup_records,
                "before_timed_s": started - first_record,
            }
        )
    )


if __name__ == "__main__":
    main()
