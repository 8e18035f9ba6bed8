"""OpenTelemetry traces of runs, sent to any OTLP/HTTP endpoint (a local Arize
Phoenix, an OpenTelemetry Collector, Jaeger, ...).

Spans come from OpenInference's LangChain instrumentation, which turns
LangChain's callbacks into spans with the OpenInference conventions that Phoenix
understands: one span for the run (the ``aime`` graph), one per node and
subgraph under it (``planner``, ``orchestrator``, ``executor`` once per task,
``reporter``, ``verifier``), one per tool call (``openinference.span.kind`` =
``TOOL``) and one per model call (``LLM``, with ``llm.model_name`` and the usage
as ``llm.token_count.prompt``, ``.completion`` and ``.total``). Each task's span
is renamed ``task <id>`` and carries ``aimegraph.task_id``, so that a trace
reads like the checklist. The thread id is the spans' ``session.id``.

Needs the ``[tracing]`` extra. ``aimegraph --otlp URL ...`` turns it on for one
command; in Python, call :func:`enable_tracing` once before running graphs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

OTLP_ENV = "AIMEGRAPH_OTLP_ENDPOINT"
"""Environment variable the CLI reads when ``--otlp`` is not given."""

TASK_ID_ATTRIBUTE = "aimegraph.task_id"
TASK_SPAN = "executor"
"""The node that runs one task; its span is renamed after the task."""


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP endpoint as given (``http://host:4318``) or with its traces
    path (``http://host:4318/v1/traces``): the latter."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"an OTLP endpoint is an http(s) URL (http://host:4318); got {endpoint!r}")
    return endpoint if parts.path.strip("/") else endpoint.rstrip("/") + "/v1/traces"


@dataclass
class Tracing:
    """Tracing switched on; :meth:`shutdown` sends what is left and switches it off."""

    provider: TracerProvider
    instrumentor: Any

    def flush(self, timeout_millis: int = 10_000) -> bool:
        return bool(self.provider.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self.instrumentor.uninstrument()
        self.provider.shutdown()


def enable_tracing(
    endpoint: str | None = None,
    *,
    exporter: SpanExporter | None = None,
    service_name: str = "aimegraph",
    batch: bool = True,
) -> Tracing:
    """Trace every LangChain and LangGraph run of this process.

    Args:
        endpoint: OTLP/HTTP URL (``http://127.0.0.1:6006`` for a local Phoenix,
            ``http://127.0.0.1:4318`` for a Collector); the ``/v1/traces`` path is
            added when missing. Ignored when ``exporter`` is given.
        exporter: Any OpenTelemetry span exporter instead (e.g. the SDK's
            ``InMemorySpanExporter`` in tests).
        service_name: The ``service.name`` resource attribute; also the project
            Phoenix files the traces under.
        batch: Export in the background (True) or as each span ends.
    """
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint) if endpoint else None)
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": service_name, "openinference.project.name": service_name}
        )
    )
    named = TaskSpanExporter(exporter)
    provider.add_span_processor(BatchSpanProcessor(named) if batch else SimpleSpanProcessor(named))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return Tracing(provider, instrumentor)


class TaskSpanExporter(SpanExporter):
    """Passes spans on to ``inner``, naming each task's span after its task.

    OpenInference names a span after its LangChain run, and every task runs in a
    run called ``executor``; the task is in the span's input. Spans are final once
    ended, so the name is put right on the way out."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([_named(span) for span in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def _named(span: ReadableSpan) -> ReadableSpan:
    if span.name != TASK_SPAN or (task_id := _task_id(span)) is None:
        return span
    return ReadableSpan(
        name=f"task {task_id}",
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes={**(span.attributes or {}), TASK_ID_ATTRIBUTE: task_id},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _task_id(span: ReadableSpan) -> str | None:
    raw = (span.attributes or {}).get("input.value")
    if not isinstance(raw, str):
        return None
    try:
        task = json.loads(raw).get("task")
    except (ValueError, AttributeError):
        return None
    task_id = task.get("id") if isinstance(task, dict) else None
    return str(task_id) if task_id else None
