"""An agent loop on the OpenAI client, traced by opentelemetry-instrumentation-openai-v2.

The instrumentation's default (v1.30) conventions put chat messages in GenAI events sent as OTLP
log records, so the program exports traces and logs, configured through the standard OTEL_*
variables as a user would (endpoints, headers, compression, service name, content capture).

The agent calls the tools the model asks for until the model answers; an empty answer (no text,
no tool call) fails the run, recorded on the root span. OPENAI_BASE_URL points the client at a
stub that plays the model. TOUCHSTONE_OTLP_ENCODING picks the exporters (`protobuf`, default, or
`json`); TOUCHSTONE_FLUSH_FIRST which signal is flushed first at exit (`traces`, default, or
`logs`). Prints the trace id; exits 1 if an export failed.
"""

from __future__ import annotations

import json
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

if os.environ.get("TOUCHSTONE_OTLP_ENCODING", "protobuf") == "json":
    from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter
else:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

FAILED_EXPORTS: list[str] = []


class SpanExporter(OTLPSpanExporter):
    def export(self, spans):
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            FAILED_EXPORTS.append("traces")
        return result


class LogExporter(OTLPLogExporter):
    def export(self, batch):
        result = super().export(batch)
        if result is not LogRecordExportResult.SUCCESS:
            FAILED_EXPORTS.append("logs")
        return result


tracer_provider = TracerProvider(resource=Resource.create())
tracer_provider.add_span_processor(BatchSpanProcessor(SpanExporter()))
logger_provider = LoggerProvider(resource=Resource.create())
logger_provider.add_log_record_processor(BatchLogRecordProcessor(LogExporter()))

from openai import OpenAI  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)

MODEL = "gpt-4o-mini"
QUESTION = "What is the weather in Paris and what should I wear?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {arg: {"type": kind}}, "required": [arg]},
        },
    }
    for name, description, arg, kind in [
        ("get_weather", "Current weather of a city.", "city", "string"),
        ("suggest_clothes", "Clothes for a temperature in °C.", "temperature_c", "number"),
    ]
]


def run_tool(name: str, arguments: str) -> dict:
    args = json.loads(arguments)
    if name == "get_weather":
        return {"city": args["city"], "temperature_c": 18, "condition": "sunny"}
    return {"items": ["light jacket", "t-shirt", "jeans"]}


class EmptyAnswer(RuntimeError):
    """The model answered with neither text nor a tool call."""


def run_agent(client: OpenAI, tracer: trace.Tracer) -> str:
    messages: list[dict] = [
        {"role": "system", "content": "You are a travel assistant. Use the tools."},
        {"role": "user", "content": QUESTION},
    ]
    while True:
        message = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = message.choices[0].message
        if not message.tool_calls:
            if not message.content:
                raise EmptyAnswer("the model sent an empty message")
            return message.content
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            with tracer.start_as_current_span(
                f"execute_tool {call.function.name}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.function.name,
                    "gen_ai.tool.call.id": call.id,
                },
            ):
                result = run_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})


def main() -> int:
    tracer = tracer_provider.get_tracer("weather_agent")
    client = OpenAI(max_retries=0)
    with tracer.start_as_current_span(
        "invoke_agent weather-agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather-agent"},
    ) as root:
        trace_id = format(root.get_span_context().trace_id, "032x")
        try:
            run_agent(client, tracer)
        except EmptyAnswer as err:
            # What a failing agent run records: the error on its span; the program goes on.
            root.record_exception(err)
            root.set_status(trace.Status(trace.StatusCode.ERROR, str(err)))
    providers = [tracer_provider, logger_provider]
    if os.environ.get("TOUCHSTONE_FLUSH_FIRST", "traces") == "logs":
        providers.reverse()
    for provider in providers:
        provider.shutdown()
    print(trace_id)
    return 1 if FAILED_EXPORTS else 0


if __name__ == "__main__":
    sys.exit(main())
