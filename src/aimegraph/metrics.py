"""Prometheus metrics of runs, for the dashboard's ``/metrics`` and each worker's
(``aimegraph worker --metrics-port``).

Two sources feed them, hooked in where tracing hooks in:

- :class:`MetricsCallback`, a LangChain callback handler added to every run's
  callbacks: each model call (duration and outcome by model), each tool call
  (duration and outcome by tool), each task (the ``executor`` run of a task:
  duration by outcome, and which are in flight);
- :class:`ObservedRun`, around the run's stream of state updates
  (``aimegraph.steering.invoke_held``, the path of the dashboard's and the workers'
  runs): tokens and cost by role and by model from the usage each node adds, so the
  counters add up to the runs' own ``usage``; runs by the status they end with and
  their duration; and, when a paused run is resumed, how long it waited for a human.

Labels are bounded: status, outcome, role, model (the model name replies carry),
tool and token kind; never a thread id, a task id or a goal.

Off until :func:`enable_metrics`; then every run of the process counts (and on
the dashboard, the ends of the runs other processes ran on its checkpoint store:
:meth:`Metrics.counted_here` keeps its own from counting twice). The
prometheus-client package (``[metrics]`` extra) is imported only then. With
``PROMETHEUS_MULTIPROC_DIR`` set (a forking pool of your own), :func:`exposition`
reports the counters and histograms of every process of the directory, and the
scrape-time gauges (tasks and runs in flight, the longest-running task) of the
process scraped.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables import RunnableConfig

from aimegraph.state import Usage
from aimegraph.state.models import RoleUsage

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult
    from langgraph.types import StateSnapshot
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = [
    "FAILED_STATUSES",
    "LiveCollector",
    "Metrics",
    "MetricsCallback",
    "ObservedRun",
    "disable_metrics",
    "enable_metrics",
    "exposition",
    "metrics_enabled",
    "observe_run",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
TASK_RUN = "executor"
"""The LangChain run (a node of the aime graph) that runs one task."""
FAILED_STATUSES = frozenset({"failed", "rejected", "budget_exhausted", "blocked"})
"""Run statuses that count as a failed run (and lengthen a streak of them)."""
TOKEN_KINDS = ("input", "output", "cached_input", "reasoning")
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
WAIT_BUCKETS = (1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400)
UNKNOWN = "unknown"


class Metrics:
    """The process's collectors on one registry, plus what is live now (tasks and
    runs in flight), which is reported when scraped."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        self.registry = REGISTRY if registry is None else registry
        r = self.registry
        self.runs = Counter(
            "aimegraph_runs", "Runs ended, by status (paused: waiting for a human)", ["status"],
            registry=r,
        )  # fmt: skip
        self.run_seconds = Histogram(
            "aimegraph_run_duration_seconds", "Wall time of a run, from start or resume to "
            "its end or pause", ["status"], buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.task_seconds = Histogram(
            "aimegraph_task_duration_seconds", "Wall time of a task's actor (or team), by outcome",
            ["outcome"], buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.model_seconds = Histogram(
            "aimegraph_model_call_duration_seconds", "Wall time of a model call, by model and "
            "outcome", ["model", "outcome"], buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.tool_seconds = Histogram(
            "aimegraph_tool_call_duration_seconds", "Wall time of a tool call, by tool and "
            "outcome (error: it raised or returned an error observation)",
            ["tool", "outcome"], buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.tokens = Counter(
            "aimegraph_tokens", "Tokens by role and kind (cached_input is part of input, "
            "reasoning part of output)", ["role", "kind"], registry=r,
        )  # fmt: skip
        self.cost = Counter("aimegraph_cost_usd", "Cost in USD by role", ["role"], registry=r)
        self.model_tokens = Counter(
            "aimegraph_model_tokens", "Tokens by model and kind", ["model", "kind"], registry=r
        )
        self.model_cost = Counter(
            "aimegraph_model_cost_usd", "Cost in USD by model", ["model"], registry=r
        )
        self.human_wait = Histogram(
            "aimegraph_human_wait_seconds", "How long a paused run waited for a human before "
            "it was resumed", buckets=WAIT_BUCKETS, registry=r,
        )  # fmt: skip
        self.failed_in_a_row = Gauge(
            "aimegraph_failed_runs_in_a_row", "Runs ended failed, rejected or out of budget "
            "since the last one that succeeded", multiprocess_mode="max", registry=r,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._tasks: dict[UUID, float] = {}
        self._runs = 0
        self._stops: dict[str, str] = {}
        """Per thread run here, the checkpoint its last run stopped at ("": running)."""
        self.live: list[LiveCollector] = []
        self.add_live(LiveCollector(self._live))

    def add_live(self, collector: LiveCollector) -> None:
        """Report ``collector``'s values (read when scraped) with these metrics."""
        self.live.append(collector)
        self.registry.register(collector)

    # -- what the sources report

    def model_call(self, model: str, outcome: str, seconds: float) -> None:
        self.model_seconds.labels(model, outcome).observe(seconds)

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        self.tool_seconds.labels(tool, outcome).observe(seconds)

    def task_started(self, run_id: UUID) -> None:
        with self._lock:
            self._tasks[run_id] = time.time()

    def task_ended(self, run_id: UUID, outcome: str) -> None:
        with self._lock:
            started = self._tasks.pop(run_id, None)
        if started is not None:
            self.task_seconds.labels(outcome).observe(time.time() - started)

    def usage(self, usage: Usage) -> None:
        """Count a share of a run's usage (a node's update) by role and by model."""
        for role, counts in usage.by_role.items():
            for kind, tokens in _tokens(counts):
                self.tokens.labels(role, kind).inc(tokens)
            self.cost.labels(role).inc(counts.cost_usd)
        for model, counts in usage.by_model.items():
            for kind, tokens in _tokens(counts):
                self.model_tokens.labels(model, kind).inc(tokens)
            self.model_cost.labels(model).inc(counts.cost_usd)

    def run_ended(self, status: str, seconds: float) -> None:
        """Count a run that ended (or paused) with ``status`` after ``seconds``."""
        self.runs.labels(status).inc()
        self.run_seconds.labels(status).observe(seconds)
        if status in FAILED_STATUSES:
            self.failed_in_a_row.inc()
        elif status == "succeeded":
            self.failed_in_a_row.set(0)

    def run_here(self, thread_id: str, stopped_at: str | None = "") -> None:
        """This process runs the thread (``""``), or ran it to its stop at the
        checkpoint ``stopped_at`` (None: no stop, it raised), and counts it there."""
        with self._lock:
            if stopped_at is None:
                self._stops.pop(thread_id, None)
            else:
                self._stops[thread_id] = stopped_at

    def counted_here(self, thread_id: str, checkpoint_id: str) -> bool:
        """Whether this process counts the thread's stop at ``checkpoint_id``: a
        reader of the checkpoints (the dashboard) leaves it out."""
        with self._lock:
            return self._stops.get(thread_id) in ("", checkpoint_id)

    # -- what alerts read

    def tool_calls(self) -> dict[tuple[str, str], float]:
        """Tool calls so far, by (tool, outcome)."""
        return {
            (s.labels["tool"], s.labels["outcome"]): s.value
            for s in _samples(self.tool_seconds.collect(), "_count")
        }

    def cost_usd(self) -> float:
        return sum(s.value for s in _samples(self.cost.collect(), "_total"))

    def failed_runs_in_a_row(self) -> int:
        return int(next(iter(_samples(self.failed_in_a_row.collect(), ""))).value)

    def longest_task_seconds(self) -> float:
        """How long the oldest task in flight has been running (0 with none)."""
        with self._lock:
            oldest = min(self._tasks.values(), default=None)
        return 0.0 if oldest is None else time.time() - oldest

    @contextmanager
    def run_in_flight(self) -> Iterator[None]:
        with self._lock:
            self._runs += 1
        try:
            yield
        finally:
            with self._lock:
                self._runs -= 1

    def _live(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            tasks, runs = len(self._tasks), self._runs
        yield GaugeMetricFamily("aimegraph_tasks_in_flight", "Tasks running now", value=tasks)
        yield GaugeMetricFamily(
            "aimegraph_task_longest_running_seconds",
            "How long the oldest task in flight has been running (0 with none)",
            value=self.longest_task_seconds(),
        )
        yield GaugeMetricFamily("aimegraph_runs_in_flight", "Runs executing now", value=runs)


class LiveCollector:
    """A custom collector over a function (values read when scraped)."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self.collect = collect


def _tokens(counts: RoleUsage) -> Iterator[tuple[str, int]]:
    yield "input", counts.input_tokens
    yield "output", counts.output_tokens
    yield "cached_input", counts.cached_input_tokens
    yield "reasoning", counts.reasoning_tokens


def _samples(families: Iterable[Metric], suffix: str) -> Iterator[Any]:
    for family in families:
        for sample in family.samples:
            if sample.name == family.name + suffix:
                yield sample


# --- the process's metrics

_METRICS: Metrics | None = None
_CURRENT: Metrics | None = None
"""The metrics runs count in: ``_METRICS`` while they are on."""
_ENABLING = threading.Lock()


def enable_metrics() -> Metrics:
    """Count every run of this process from now on (idempotent); returns the metrics
    on prometheus-client's default registry."""
    global _CURRENT, _METRICS
    with _ENABLING:
        if _METRICS is None:
            _METRICS = Metrics()
        _CURRENT = _METRICS
        return _METRICS


def disable_metrics() -> None:
    """Count no more runs (the counts so far stay on the registry)."""
    global _CURRENT
    _CURRENT = None


def metrics_enabled() -> Metrics | None:
    return _CURRENT


def exposition(*extra: CollectorRegistry) -> tuple[bytes, str]:
    """The text a scrape gets (the process's metrics, or every process's with
    ``PROMETHEUS_MULTIPROC_DIR``, then those of the ``extra`` registries) and its
    content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    registry = REGISTRY
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        # What is live now (tasks and runs in flight) has no file to share: the
        # scraped process reports its own, beside every process's counters.
        for collector in _METRICS.live if _METRICS is not None else ():
            registry.register(collector)
    return b"".join(generate_latest(r) for r in (registry, *extra)), CONTENT_TYPE_LATEST


# --- the callback handler


class MetricsCallback(BaseCallbackHandler):
    """Times model calls, tool calls and tasks of the runs it is given to."""

    run_inline = True  # no thread hop under async runs: the handler only takes a lock

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._started: dict[UUID, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _start(self, run_id: UUID, label: str) -> None:
        with self._lock:
            self._started[run_id] = (label, time.perf_counter())

    def _stop(self, run_id: UUID) -> tuple[str, float] | None:
        with self._lock:
            started = self._started.pop(run_id, None)
        return None if started is None else (started[0], time.perf_counter() - started[1])

    # model calls

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, _model_name(serialized, kwargs.get("metadata")))

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, _model_name(serialized, kwargs.get("metadata")))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        if (stopped := self._stop(run_id)) is not None:
            model = _answered_by(response) or stopped[0]
            self.metrics.model_call(model, "ok", stopped[1])

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if (stopped := self._stop(run_id)) is not None:
            self.metrics.model_call(stopped[0], "error", stopped[1])

    # tool calls

    def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, str(serialized.get("name") or kwargs.get("name") or UNKNOWN))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if (stopped := self._stop(run_id)) is not None:
            outcome = "error" if getattr(output, "status", None) == "error" else "ok"
            self.metrics.tool_call(stopped[0], outcome, stopped[1])

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if (stopped := self._stop(run_id)) is not None:
            self.metrics.tool_call(stopped[0], "error", stopped[1])

    # tasks

    def on_chain_start(
        self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if kwargs.get("name") == TASK_RUN and isinstance(inputs, Mapping) and "task" in inputs:
            self.metrics.task_started(run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.metrics.task_ended(run_id, _task_outcome(outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        from langgraph.errors import GraphBubbleUp

        # An interrupt (a question for a human) or a drain stops a task without ending it.
        self.metrics.task_ended(run_id, "paused" if isinstance(error, GraphBubbleUp) else "error")


def _model_name(serialized: dict[str, Any] | None, metadata: Mapping[str, Any] | None) -> str:
    named = (metadata or {}).get("ls_model_name") or (serialized or {}).get("name")
    return str(named or UNKNOWN)


def _answered_by(response: LLMResult) -> str | None:
    """The model name the reply carries (as ``Usage.by_model`` counts it)."""
    for generations in response.generations:
        for generation in generations:
            message = getattr(generation, "message", None)
            name = getattr(message, "response_metadata", {}).get("model_name")
            if name:
                return str(name)
    return None


def _task_outcome(outputs: Any) -> str:
    """The status the task's actor left it in (completed, failed), from its output."""
    tasks = outputs.get("tasks") if isinstance(outputs, Mapping) else None
    if isinstance(tasks, Mapping):
        for task in tasks.values():
            status = getattr(task, "status", None)
            if status in ("completed", "failed"):
                return str(status)
    return "ended"


# --- a run's lifecycle


class ObservedRun:
    """One invocation of a run under the metrics: its config (with the callback
    handler) and the counts taken from its state updates."""

    def __init__(
        self, metrics: Metrics | None, config: RunnableConfig, nodes: Iterable[str] = ()
    ) -> None:
        self.metrics = metrics
        # The updates stream also carries the results of functional-API tasks inside a
        # node (the eager runner's actors), which the node's own update adds up again.
        self.nodes = frozenset(nodes)
        self.config = config if metrics is None else with_handler(config, MetricsCallback(metrics))
        self.started = time.perf_counter()
        self.status: str | None = None
        self.stopped_at: str | None = None
        """The checkpoint the run stopped at."""

    def update(self, chunk: Any) -> None:
        """Count the usage a ``stream_mode="updates"`` chunk adds (at the end of each
        step of the graph)."""
        if self.metrics is None or not isinstance(chunk, Mapping):
            return
        for node, value in chunk.items():
            if node not in self.nodes:
                continue
            usage = value.get("usage") if isinstance(value, Mapping) else None
            if isinstance(usage, Usage):
                self.metrics.usage(usage)

    def ended(self, snapshot: StateSnapshot) -> None:
        """The run stopped here: ended (its status) or paused for a human."""
        self.status = "paused" if snapshot.interrupts else snapshot.values.get("status", "running")
        self.stopped_at = snapshot.config.get("configurable", {}).get("checkpoint_id")


def with_handler(config: RunnableConfig, handler: BaseCallbackHandler) -> RunnableConfig:
    """``config`` with ``handler`` added to its callbacks (a list or a manager)."""
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        return {**config, "callbacks": manager}
    return {**config, "callbacks": [*(callbacks or []), handler]}


@contextmanager
def observe_run(graph: Any, config: RunnableConfig) -> Iterator[ObservedRun]:
    """Count the run ``graph`` carries on in the ``with`` block (nothing when metrics
    are off): a paused run's wait for a human when it is resumed here, its usage
    (feed :meth:`ObservedRun.update` the updates), and how it ended (call
    :meth:`ObservedRun.ended`; an exception counts as ``error``, a drain as
    ``stopped``)."""
    from langgraph.errors import GraphDrained

    metrics = _CURRENT
    run = ObservedRun(metrics, config, getattr(graph, "nodes", {}))
    if metrics is None:
        yield run
        return
    _count_wait(metrics, graph, config)
    thread_id = str(config.get("configurable", {}).get("thread_id") or "")
    metrics.run_here(thread_id)
    with metrics.run_in_flight():
        try:
            yield run
        except GraphDrained:
            run.status = "stopped"
            raise
        except BaseException:
            run.status = "error"
            raise
        finally:
            metrics.run_ended(run.status or "error", time.perf_counter() - run.started)
            metrics.run_here(thread_id, run.stopped_at)


def _count_wait(metrics: Metrics, graph: Any, config: RunnableConfig) -> None:
    """A run paused for a human is being resumed: it waited since its last checkpoint."""
    snapshot = graph.get_state(config)
    if snapshot.interrupts and snapshot.created_at:
        waited = time.time() - datetime.fromisoformat(snapshot.created_at).timestamp()
        metrics.human_wait.observe(max(0.0, waited))
