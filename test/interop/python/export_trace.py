"""Sends one agent trace to Touchstone with the real OpenTelemetry Python SDK and OTLP/HTTP exporter.

Configured only through the standard OTEL_* environment variables (endpoint, headers, service
name), exactly as a user would. Prints the trace id; exits non-zero if the export failed.
"""

import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Status, StatusCode


class RecordingExporter(OTLPSpanExporter):
    failed = False

    def export(self, spans):
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            RecordingExporter.failed = True
        return result


def main() -> int:
    provider = TracerProvider(resource=Resource.create({"touchstone.label.workflow": "weather"}))
    provider.add_span_processor(SimpleSpanProcessor(RecordingExporter()))
    tracer = provider.get_tracer("touchstone-interop")
    with tracer.start_as_current_span(
        "invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}
    ) as root:
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 42,
                "gen_ai.usage.output_tokens": 7,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "weather service timed out"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    print(trace_id)
    return 1 if RecordingExporter.failed else 0


if __name__ == "__main__":
    sys.exit(main())
