"""OpenTelemetry tracing: the spans of a run (in memory), and one real OTLP/HTTP
round trip from ``aimegraph --otlp`` to a receiver on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("openinference.instrumentation.langchain", reason="no [tracing] extra")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from aimegraph.checkpoints import open_checkpointer, run_config  # noqa: E402
from aimegraph.cli import main  # noqa: E402
from aimegraph.steering import prepare_demo, run_graph  # noqa: E402
from aimegraph.tracing import TASK_ID_ATTRIBUTE, enable_tracing, traces_url  # noqa: E402


@pytest.fixture
def traced(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    """The finished spans of one demo run (thread ``traced``) and its LLM calls."""
    monkeypatch.chdir(tmp_path)
    exporter = InMemorySpanExporter()
    tracing = enable_tracing(exporter=exporter, batch=False)
    try:
        with open_checkpointer("memory") as saver:
            settings, goal = prepare_demo("traced")
            out = run_graph(settings, saver).invoke({"goal": goal}, run_config("traced", settings))
            assert out["status"] == "succeeded"
    finally:
        tracing.shutdown()
    return list(exporter.get_finished_spans()), out["usage"].llm_calls


def _one_task(span: Any) -> bool:
    raw = (span.attributes or {}).get("input.value")
    return isinstance(raw, str) and isinstance(json.loads(raw).get("task"), dict)


def kind(span: Any) -> str | None:
    value = (span.attributes or {}).get("openinference.span.kind")
    return str(value) if value is not None else None


def test_a_run_traces_planner_tasks_tools_and_model_calls(traced: tuple[list[Any], int]) -> None:
    spans, llm_calls = traced
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "aime" and root.attributes["session.id"] == "traced"
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    names = {s.name for s in spans}
    assert {"planner", "orchestrator", "reporter", "verifier"} <= names

    tasks = {s.attributes[TASK_ID_ATTRIBUTE] for s in spans if s.name.startswith("task ")}
    assert tasks == {"t1", "t2", "t3", "t4"}
    # Every span that runs one task is named after it (the eager scheduler's own
    # executor span, which starts tasks as their dependencies finish, holds none).
    assert not [s for s in spans if s.name == "executor" and _one_task(s)]

    tools = {s.name for s in spans if kind(s) == "TOOL"}
    assert {"list_dir", "python", "calculator", "write_file", "submit_result"} <= tools

    llm = [s for s in spans if kind(s) == "LLM"]
    assert len(llm) == llm_calls
    for span in llm:
        counts = span.attributes
        assert counts["llm.token_count.prompt"] > 0 and counts["llm.token_count.completion"] > 0
        assert counts["llm.token_count.total"] == (
            counts["llm.token_count.prompt"] + counts["llm.token_count.completion"]
        )


def test_tracing_is_switched_off_by_shutdown(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exporter = InMemorySpanExporter()
    enable_tracing(exporter=exporter, batch=False).shutdown()
    with open_checkpointer("memory") as saver:
        settings, goal = prepare_demo("untraced")
        run_graph(settings, saver).invoke({"goal": goal}, run_config("untraced", settings))
    assert exporter.get_finished_spans() == ()


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each protobuf export request."""

    received: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest], list[str]]]:
    received: list[ExportTraceServiceRequest] = []
    paths: list[str] = []

    class Handler(_Receiver):
        def do_POST(self) -> None:  # noqa: N802
            paths.append(self.path)
            super().do_POST()

    Handler.received = received
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received, paths
    server.shutdown()
    server.server_close()


def test_the_cli_exports_over_otlp_http(
    receiver: tuple[str, list[ExportTraceServiceRequest], list[str]],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, received, paths = receiver
    monkeypatch.chdir(tmp_path)
    code = main(["--otlp", url, "--checkpoints", "memory", "demo", "--json", "--thread", "otlp"])
    assert code == 0
    llm_calls = json.loads(capsys.readouterr().out)["usage"]["llm_calls"]
    assert received and set(paths) == {"/v1/traces"}
    spans = [
        span
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    resource = {
        a.key: a.value.string_value for a in received[0].resource_spans[0].resource.attributes
    }
    assert resource["service.name"] == "aimegraph"
    names = {span.name for span in spans}
    assert {"aime", "planner", "task t1", "task t4", "list_dir"} <= names
    llm = [s for s in spans if any(a.key == "llm.token_count.total" for a in s.attributes)]
    assert len(llm) == llm_calls > 0


def test_otlp_endpoints(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert traces_url("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    assert traces_url("https://h/custom/path") == "https://h/custom/path"
    with pytest.raises(ValueError, match="http"):
        traces_url("127.0.0.1:4318")
    assert main(["--otlp", "localhost:4318", "threads"]) == 2
