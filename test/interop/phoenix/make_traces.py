"""Makes the Phoenix connector's test traces with real OpenInference instrumentation.

Usage:
  python make_traces.py make  <phoenix-base-url> <project>   (prints one JSON line of trace ids)
  python make_traces.py close <phoenix-base-url> <project> <trace-id> <span-id> <start-ns>

The bearer key for Phoenix (auth on) comes from PHOENIX_API_KEY. Everything goes to Phoenix over
OTLP/HTTP (protobuf) with the project as the `openinference.project.name` resource attribute; the
model is the deterministic OpenAI stub the OTLP fixtures were captured with
(test/fixtures/otlp/capture/stub_openai.py), served from a thread of this process on 127.0.0.1.

`make`, in this order (each trace is waited for in Phoenix before the next starts, so their
start times ascend):
  agent      the fixture scenario openinference-openai with SCENARIO_TOOL_ERROR=1
             (openinference-instrumentation-openai, @tracer.agent/@tracer.tool; suggest_clothes
             raises), run as it was for the fixture, as its own process
  langgraph  the fixture scenario openinference-langgraph (openinference-instrumentation-langchain,
             LangGraph create_react_agent), as its own process
  questions  four small traces: CHAIN root `answer` with a RETRIEVER child; the root carries the
             span attribute touchstone.label.env=interop, every span the metadata
             {"touchstone.label.team": "search", "question": N} (using_metadata)
  open       an AGENT root `open-agent` that never ends: its LLM child (openai instrumentation) is
             exported, the root is not, so Phoenix holds the trace without a root span
`close` sends that root span late (same trace and span id, the original start time), as an
agent whose process died before exporting would when it is restarted and re-sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "otlp", "capture"))
SCENARIOS = os.path.join(CAPTURE, "scenarios")
DUMMY_KEY = "sk-touchstone-dummy-0000"


def api_key() -> str:
    return os.environ.get("PHOENIX_API_KEY", "")


def phoenix_get(base: str, path: str, query: list[tuple[str, str]]) -> dict:
    url = f"{base}{path}?{urllib.parse.urlencode(query)}"
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {api_key()}"})
    with urllib.request.urlopen(req, timeout=30) as res:
        return json.loads(res.read())


def root_trace_ids(base: str, project: str) -> set[str]:
    """Trace ids of every root span Phoenix has stored in the project."""
    out: set[str] = set()
    cursor = None
    path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    while True:
        query = [("parent_id", "null"), ("limit", "1000")]
        if cursor:
            query.append(("cursor", cursor))
        try:
            body = phoenix_get(base, path, query)
        except urllib.error.HTTPError as err:
            if err.code == 404:  # the project does not exist until its first span is stored
                return out
            raise
        out.update(s["context"]["trace_id"] for s in body["data"])
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def wait_for_new_trace(base: str, project: str, known: set[str], timeout: float = 60) -> str:
    """The one trace id with a root span that appeared since `known`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        new = root_trace_ids(base, project) - known
        if len(new) == 1:
            trace_id = new.pop()
            known.add(trace_id)
            return trace_id
        if len(new) > 1:
            raise SystemExit(f"expected one new trace, Phoenix shows {len(new)}")
        time.sleep(0.25)
    raise SystemExit("Phoenix did not store the trace in time")


def wait_for_spans(base: str, project: str, trace_id: str, count: int, timeout: float = 60):
    path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            body = phoenix_get(base, path, [("trace_id", trace_id), ("limit", "1000")])
            if len(body["data"]) >= count:
                return
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise
        time.sleep(0.25)
    raise SystemExit(f"Phoenix did not store {count} spans of {trace_id} in time")


def start_stub() -> str:
    """The fixtures' OpenAI stub on 127.0.0.1 (a daemon thread: it ends with this process)."""
    sys.path.insert(0, CAPTURE)
    import stub_openai  # noqa: PLC0415

    server = ThreadingHTTPServer(("127.0.0.1", 0), stub_openai.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def otel_env(base: str, project: str, stub: str) -> dict[str, str]:
    """The environment capture.sh gives a scenario, pointed at Phoenix instead of its receiver."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONUNBUFFERED": "1",
        "OPENAI_API_KEY": DUMMY_KEY,
        "OPENAI_BASE_URL": stub,
        "OTEL_SERVICE_NAME": "weather-agent",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{base}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "",
    }
    if api_key():
        env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = "authorization=Bearer%20" + urllib.parse.quote(
            api_key()
        )
    return env


def run_scenario(script: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, os.path.join(SCENARIOS, script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def provider(base: str, project: str, id_generator=None):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    kwargs = {"id_generator": id_generator} if id_generator is not None else {}
    tp = TracerProvider(
        resource=Resource.create(
            {"service.name": "phoenix-interop", "openinference.project.name": project}
        ),
        **kwargs,
    )
    headers = {"authorization": f"Bearer {api_key()}"} if api_key() else {}
    tp.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers))
    )
    return tp


def make(base: str, project: str) -> None:
    stub = start_stub()
    known = root_trace_ids(base, project)
    out: dict[str, object] = {"project": project}

    env = otel_env(base, project, stub)
    run_scenario("openinference_openai.py", {**env, "SCENARIO_TOOL_ERROR": "1"})
    out["agent"] = wait_for_new_trace(base, project, known)
    run_scenario("openinference_langgraph.py", env)
    out["langgraph"] = wait_for_new_trace(base, project, known)

    from openinference.instrumentation import OITracer, TraceConfig, using_metadata

    tp = provider(base, project)
    tracer = OITracer(tp.get_tracer("phoenix_interop", "1.0.0"), config=TraceConfig())
    questions = []
    for n in range(1, 5):
        with using_metadata({"touchstone.label.team": "search", "question": n}):
            with tracer.start_as_current_span(
                "answer", openinference_span_kind="chain"
            ) as root:
                root.set_attribute("touchstone.label.env", "interop")
                root.set_input(f"question {n}")
                with tracer.start_as_current_span(
                    "retrieve", openinference_span_kind="retriever"
                ) as child:
                    child.set_input(f"question {n}")
                    child.set_attribute("retrieval.documents.0.document.content", f"doc {n}")
                    child.set_attribute("retrieval.documents.0.document.id", f"d{n}")
                root.set_output(f"answer {n}")
        questions.append(wait_for_new_trace(base, project, known))
    out["questions"] = questions

    # The open trace: its LLM child is exported, the AGENT root never ends here.
    from openai import OpenAI
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=tp)
    client = OpenAI(api_key=DUMMY_KEY, base_url=stub)
    root = tracer.start_span("open-agent", openinference_span_kind="agent")
    root.set_input("What is the weather in Paris and what should I wear?")
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        )
    ctx = root.get_span_context()
    trace_id = format(ctx.trace_id, "032x")
    wait_for_spans(base, project, trace_id, 1)
    out["open"] = {
        "trace_id": trace_id,
        "span_id": format(ctx.span_id, "016x"),
        "start_ns": str(root.start_time),
    }
    tp.shutdown()
    print(json.dumps(out), flush=True)


def close(base: str, project: str, trace_id: str, span_id: str, start_ns: str) -> None:
    from openinference.instrumentation import OITracer, TraceConfig
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Fixed(IdGenerator):
        def generate_trace_id(self) -> int:
            return int(trace_id, 16)

        def generate_span_id(self) -> int:
            return int(span_id, 16)

    tp = provider(base, project, Fixed())
    tracer = OITracer(tp.get_tracer("phoenix_interop", "1.0.0"), config=TraceConfig())
    root = tracer.start_span("open-agent", openinference_span_kind="agent", start_time=int(start_ns))
    root.set_input("What is the weather in Paris and what should I wear?")
    root.set_output("It is sunny in Paris.")
    root.end()
    tp.shutdown()
    print(json.dumps({"closed": trace_id}), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "make":
        make(sys.argv[2], sys.argv[3])
    elif mode == "close":
        close(*sys.argv[2:7])
    else:
        raise SystemExit(f"unknown mode {mode}")
