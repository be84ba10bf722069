"""Creates an experiment and agent-like traces on a live MLflow server with the MLflow SDK.

Usage: python make_traces.py <tracking-uri> <experiment-name>

Prints one JSON object on stdout: the experiment id and the MLflow trace ids it made, by role:

- ``agent``: a CHAIN root with a CHAT_MODEL span (chat messages in, a tool-calling answer out,
  token usage), two TOOL spans (``get_weather`` succeeds, ``get_time`` raises), a second
  CHAT_MODEL span with the final answer; trace tags and metadata (session, user).
- ``questions``: three small traces, for paging.
- ``artifact_only``: a trace whose spans went to the artifact store only (as from a tracking
  store that cannot log spans), so batchGet leaves it out.
- ``no_spans``: a trace that has a TraceInfo but no spans anywhere.
- ``running``: a trace whose root span never ends: its child spans are logged, the trace stays
  IN_PROGRESS.

Used by the live connector test and to record src/sources/connectors/mlflow/testdata/.
"""

import json
import os
import sys
import time
import uuid

# Synchronous export: every trace is on the server when its call returns.
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"

import mlflow  # noqa: E402
from mlflow.entities import SpanType, TraceInfo, TraceLocation, TraceState  # noqa: E402
from mlflow.tracing.constant import SpanAttributeKey  # noqa: E402
from mlflow.tracing.provider import _get_trace_exporter  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

SYSTEM = "You are a travel helper. Use the tools."
QUESTION = "What is the weather in Paris, and what time is it there?"
ANSWER = "It is sunny and 21°C in Paris; the time service did not answer."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a time zone",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]
CALLS = [
    {
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    },
    {
        "id": "call_t1",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
    },
]


def completion(message, prompt_tokens, completion_tokens):
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def chat_span(name, messages, answer, prompt_tokens, completion_tokens):
    with mlflow.start_span(name=name, span_type=SpanType.CHAT_MODEL) as span:
        span.set_inputs({"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS})
        span.set_outputs(completion(answer, prompt_tokens, completion_tokens))
        span.set_attribute(SpanAttributeKey.MESSAGE_FORMAT, "openai")
        span.set_attribute(
            SpanAttributeKey.CHAT_USAGE,
            {
                "input_tokens": prompt_tokens,
                "output_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
    return answer


@mlflow.trace(span_type=SpanType.TOOL)
def get_weather(city):
    return {"city": city, "condition": "sunny", "temp_c": 21}


@mlflow.trace(span_type=SpanType.TOOL)
def get_time(tz):
    raise TimeoutError("time service timed out")


@mlflow.trace(name="travel_agent", span_type=SpanType.CHAIN)
def travel_agent(question):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    first = chat_span("ChatOpenAI", messages, {"role": "assistant", "content": None, "tool_calls": CALLS}, 84, 41)
    messages.append(first)
    messages.append({"role": "tool", "tool_call_id": "call_w1", "content": json.dumps(get_weather("Paris"))})
    try:
        get_time("Europe/Paris")
    except TimeoutError as err:
        messages.append({"role": "tool", "tool_call_id": "call_t1", "content": f"error: {err}"})
    chat_span("ChatOpenAI", messages, {"role": "assistant", "content": ANSWER}, 152, 19)
    mlflow.update_current_trace(
        tags={"touchstone.label.env": "interop", "workflow": "weather"},
        metadata={"mlflow.trace.session": "conv-42", "mlflow.trace.user": "u-7"},
    )
    return ANSWER


@mlflow.trace(name="answer", span_type=SpanType.CHAIN)
def answer(question):
    with mlflow.start_span(name="retrieve", span_type=SpanType.RETRIEVER) as span:
        span.set_inputs({"query": question})
        span.set_outputs(["doc-1", "doc-2"])
    return f"echo: {question}"


def main():
    uri, experiment_name = sys.argv[1], sys.argv[2]
    mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.set_experiment(experiment_name).experiment_id
    ids = {"experiment_id": experiment_id}

    travel_agent(QUESTION)
    ids["agent"] = mlflow.get_last_active_trace_id()

    ids["questions"] = []
    for q in ["first question", "second question", "third question"]:
        time.sleep(0.01)  # distinct start milliseconds, so the order is unambiguous
        answer(q)
        ids["questions"].append(mlflow.get_last_active_trace_id())

    # Spans only in the artifact store: the exporter behaves as against a store without span
    # logging (it then uploads traces.json instead).
    exporter = _get_trace_exporter()
    exporter._store_supports_log_spans = False
    try:
        answer("artifact-only question")
        ids["artifact_only"] = mlflow.get_last_active_trace_id()
    finally:
        exporter._store_supports_log_spans = True

    # A TraceInfo with no spans anywhere.
    client = MlflowClient()
    no_spans_id = "tr-" + uuid.uuid4().hex
    client._tracking_client.store.start_trace(
        TraceInfo(
            trace_id=no_spans_id,
            trace_location=TraceLocation.from_experiment_id(experiment_id),
            request_time=int(time.time() * 1000),
            execution_duration=5,
            state=TraceState.OK,
            tags={"mlflow.traceName": "no-spans"},
        )
    )
    ids["no_spans"] = no_spans_id

    # A trace still running: the child span ends (and is logged), the root never does.
    root = mlflow.start_span_no_context(name="long_task", span_type=SpanType.AGENT, inputs={"task": "still going"})
    step = mlflow.start_span_no_context(name="step-1", span_type=SpanType.TOOL, parent_span=root, inputs={"n": 1})
    step.set_outputs({"ok": True})
    step.end()
    ids["running"] = root.trace_id

    print(json.dumps(ids))
    sys.stdout.flush()
    # The root span is left open on purpose; skip the exporter's shutdown so it is never sent.
    os._exit(0)


if __name__ == "__main__":
    main()
