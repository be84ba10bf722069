"""Traces for the live trace-source test, made with the MLflow SDK; one of them ends on request.

Usage: python source_traces.py <tracking-uri> <experiment-name>

Makes, in this order:

- ``agent``: make_traces.py's agent trace (CHAIN root; two CHAT_MODEL spans with OpenAI chat
  messages and token usage; TOOL spans ``get_weather``, which succeeds, and ``get_time``, which
  raises; tag ``touchstone.label.env=interop``).
- ``plain``: a small trace with no tool call (CHAIN root, a RETRIEVER span).
- ``running``: an AGENT root that stays open, with a finished TOOL child ``step-1`` (logged, so
  MLflow lists the trace as IN_PROGRESS).

Prints one JSON line with the experiment id and the trace ids, then waits on stdin. A line
``end`` logs a second finished TOOL child ``step-2``, ends the root span (the trace becomes OK),
prints ``{"ended": <id>}`` and exits. If stdin closes first, it exits leaving the trace running.
"""

import json
import os
import sys

# Synchronous export: every span is on the server when its call returns.
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"

import mlflow  # noqa: E402
from make_traces import QUESTION, answer, travel_agent  # noqa: E402  (same directory)
from mlflow.entities import SpanType  # noqa: E402


def main():
    uri, experiment_name = sys.argv[1], sys.argv[2]
    mlflow.set_tracking_uri(uri)
    ids = {"experiment_id": mlflow.set_experiment(experiment_name).experiment_id}

    travel_agent(QUESTION)
    ids["agent"] = mlflow.get_last_active_trace_id()
    answer("a question without tools")
    ids["plain"] = mlflow.get_last_active_trace_id()

    root = mlflow.start_span_no_context(
        name="long_task", span_type=SpanType.AGENT, inputs={"task": "still going"}
    )
    step = mlflow.start_span_no_context(
        name="step-1", span_type=SpanType.TOOL, parent_span=root, inputs={"n": 1}
    )
    step.set_outputs({"ok": True})
    step.end()
    ids["running"] = root.trace_id

    print(json.dumps(ids), flush=True)
    for line in sys.stdin:
        if line.strip() == "end":
            step = mlflow.start_span_no_context(
                name="step-2", span_type=SpanType.TOOL, parent_span=root, inputs={"n": 2}
            )
            step.set_outputs({"ok": True})
            step.end()
            root.set_outputs({"done": True})
            root.end()
            print(json.dumps({"ended": ids["running"]}), flush=True)
            return
    # Stdin closed without "end": leave the root open, and skip the exporter's shutdown so it is
    # never sent.
    os._exit(0)


if __name__ == "__main__":
    main()
