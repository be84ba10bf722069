"""Logs one agent trace with MLflow's own tracing library and prints its spans as OTLP/JSON.

Usage: python sdk_trace.py <tracking-uri> <experiment-name> <otel-trace-id>

The trace (an AGENT root span, a TOOL span that raises) is logged to the server synchronously.
Its spans are then read back from the server and printed, with the attributes MLflow's library
set on them (``mlflow.traceRequestId``, ``mlflow.spanType``, … JSON-encoded, as MLflow writes
them), under a root span of other instrumentation (an HTTP server span, without MLflow's
attributes), as one OTLP/JSON export request whose spans carry ``<otel-trace-id>`` as their trace
id: the sink test sends it to Touchstone, where only the ``mlflow.traceRequestId`` of MLflow's
spans then names the MLflow trace. Prints one JSON object: ``{"mlflowTraceId": …, "otlp": …}``.
"""

import json
import os
import secrets
import sys

# Synchronous export: the trace is on the server when the span closes.
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"

import mlflow  # noqa: E402
from mlflow.entities import SpanType  # noqa: E402

tracking_uri, experiment, otel_trace_id = sys.argv[1:4]
mlflow.set_tracking_uri(tracking_uri)
mlflow.set_experiment(experiment)

with mlflow.start_span("invoke_agent weather", span_type=SpanType.AGENT) as root:
    root.set_inputs({"question": "What is the weather in Paris?"})
    try:
        with mlflow.start_span("get_weather", span_type=SpanType.TOOL) as tool:
            tool.set_inputs({"city": "Paris"})
            raise RuntimeError("the weather service did not answer")
    except RuntimeError:
        pass
    root.set_outputs({"answer": "I could not get the weather."})

STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


HTTP_ROOT = secrets.token_hex(8)


def otlp_span(span):
    raw = span._span  # the OpenTelemetry span: its attributes as MLflow stored them
    return {
        "traceId": otel_trace_id,
        "spanId": span.span_id,
        "parentSpanId": span.parent_id or HTTP_ROOT,
        "name": span.name,
        "kind": 1,
        "startTimeUnixNano": str(span.start_time_ns),
        "endTimeUnixNano": str(span.end_time_ns),
        "attributes": [
            {"key": k, "value": {"stringValue": str(v)}} for k, v in raw.attributes.items()
        ],
        "status": {"code": STATUS[span.status.status_code.value]},
    }


trace = mlflow.get_trace(root.trace_id)
mlflow_root = next(s for s in trace.data.spans if not s.parent_id)
http_root = {
    "traceId": otel_trace_id,
    "spanId": HTTP_ROOT,
    "name": "POST /chat",
    "kind": 2,
    "startTimeUnixNano": str(mlflow_root.start_time_ns - 1_000_000),
    "endTimeUnixNano": str(mlflow_root.end_time_ns + 1_000_000),
    "attributes": [{"key": "http.request.method", "value": {"stringValue": "POST"}}],
    "status": {"code": 0},
}
otlp = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [
                {"scope": {"name": "http"}, "spans": [http_root]},
                {"scope": {"name": "mlflow"}, "spans": [otlp_span(s) for s in trace.data.spans]},
            ],
        }
    ]
}
print(json.dumps({"mlflowTraceId": trace.info.trace_id, "otlp": otlp}))
