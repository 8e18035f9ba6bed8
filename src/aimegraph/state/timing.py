"""Where a run's time went: the task timestamps as the engine sets them, and the
timeline read back from a run's state (a Gantt bar per task and per planner,
reporter and verifier call, the time to the first task and the critical path).

Every time is in epoch seconds (``time.time()``), as ``run_started_at`` is; the
functions that stamp a task take the moment as ``at``, so tests can fix it. A task's
``ready_at`` is when it could first have started, ``started_at`` when its actor
started and ``ended_at`` when it settled (all of its latest attempt): the gap
between ready and started is time spent waiting for a free actor slot or for a
super-step's slowest task, the bar from started to ended the task's own work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from aimegraph.state.models import Span, Task, Usage

Tasks = Mapping[str, Task]


def stamp_ready(changed: Tasks, tasks: Tasks, *, at: float) -> dict[str, Task]:
    """``changed`` (a plan's new and revised tasks, about to join ``tasks``) with the
    pending ones whose dependencies are all completed ready ``at`` the commit; the
    others become ready when their last dependency ends (see :func:`start_attempt`)."""
    merged = {**tasks, **changed}
    stamped = {}
    for task_id, task in changed.items():
        if task.status == "pending" and task.ready_at is None and _inputs_done(task, merged):
            task = task.model_copy(update={"ready_at": at})
        stamped[task_id] = task
    return stamped


def start_attempt(task: Task, tasks: Tasks, *, at: float) -> Task:
    """``task``, its next attempt started ``at``: in progress, one attempt more, the
    previous attempt's end and tool calls cleared. A task with no ``ready_at`` yet was
    ready when its last dependency ended (or ``at``, with none); never after ``at``."""
    ready = task.ready_at
    if ready is None:
        ends = [tasks[d].ended_at for d in task.dependencies if d in tasks]
        ready = max((end for end in ends if end is not None), default=at)
    return task.model_copy(
        update={
            "status": "in_progress",
            "attempts": task.attempts + 1,
            "ready_at": min(ready, at),
            "started_at": at,
            "ended_at": None,
            "tool_spans": (),
        }
    )


def _inputs_done(task: Task, tasks: Tasks) -> bool:
    return all(d in tasks and tasks[d].status == "completed" for d in task.dependencies)


@dataclass(frozen=True)
class Bar:
    """One strip of the timeline, in seconds since the run started: a task's latest
    attempt (``kind="task"``, ``name`` its id) or one planner, reporter or verifier
    call (``kind`` and ``name`` the role). ``ready`` is a task's ready time, ``end``
    None while it runs; ``tools`` the attempt's timed tool calls (those that ran) as
    ``(tool, start, end)``, ``tool_calls`` the task's tool calls as its usage counts
    them (every attempt's, refused ones and its check's too), ``earlier`` its failed
    attempts before this one as ``(start, end)``."""

    kind: str
    name: str
    start: float
    end: float | None
    ready: float | None = None
    title: str = ""
    status: str = ""
    tools: tuple[tuple[str, float, float], ...] = ()
    tool_calls: int = 0
    earlier: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Timeline:
    """A run's time: its bars in start order; ``time_to_first_task_s`` from the run's
    start to its first task's start; ``critical_path`` the chain of dependent tasks
    whose durations add up the most (``critical_path_s``); ``elapsed_s`` from the
    start to the latest end. ``started_at`` (epoch seconds) is the run's start, the
    origin of every bar."""

    started_at: float | None
    bars: list[Bar] = field(default_factory=list)
    time_to_first_task_s: float | None = None
    critical_path: list[str] = field(default_factory=list)
    critical_path_s: float = 0.0
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the dashboard's and ``show --json``'s ``timeline``)."""
        return asdict(self)


def run_timeline(values: Mapping[str, Any]) -> Timeline:
    """The timeline of the run in a state's ``values`` (its ``tasks``, ``spans``,
    ``run_started_at`` and ``usage``). Without a recorded start (a run from before
    timestamps, or one that has not started) the earliest time found is the origin."""
    tasks: Tasks = values.get("tasks") or {}
    usage: Usage = values.get("usage") or Usage()
    spans: Sequence[Span] = values.get("spans") or ()
    times = [s.started_at for s in spans] + [
        t for task in tasks.values() for t in (task.ready_at, task.started_at) if t is not None
    ]
    origin = values.get("run_started_at") or min(times, default=None)
    if origin is None:
        return Timeline(started_at=None)

    def since(at: float | None) -> float | None:
        return None if at is None else at - origin

    bars = [
        Bar(
            kind=span.name,
            name=span.name,
            start=span.started_at - origin,
            end=span.ended_at - origin,
        )
        for span in spans
    ]
    for task in tasks.values():
        if task.started_at is None:
            continue
        tools = tuple((s.name, s.started_at - origin, s.ended_at - origin) for s in task.tool_spans)
        earlier = tuple((s.started_at - origin, s.ended_at - origin) for s in task.past_attempts)
        used = usage.by_task.get(task.id)
        bars.append(
            Bar(
                kind="task",
                name=task.id,
                start=task.started_at - origin,
                end=since(task.ended_at),
                ready=since(task.ready_at),
                title=task.title,
                status=task.status,
                tools=tools,
                tool_calls=len(tools) if used is None else used.tool_calls,
                earlier=earlier,
            )
        )
    bars.sort(key=lambda bar: bar.earlier[0][0] if bar.earlier else bar.start)
    starts = [bar.earlier[0][0] if bar.earlier else bar.start for bar in bars if bar.kind == "task"]
    path, path_s = critical_path(tasks)
    ends = [bar.end if bar.end is not None else bar.start for bar in bars]
    return Timeline(
        started_at=origin,
        bars=bars,
        time_to_first_task_s=min(starts, default=None),
        critical_path=path,
        critical_path_s=path_s,
        elapsed_s=max(ends, default=0.0),
    )


def critical_path(tasks: Tasks) -> tuple[list[str], float]:
    """The chain of dependent tasks (each depending on the one before) whose
    durations (``ended_at - started_at``; 0 for a task that has not run) add up the
    most, and that sum: no schedule can finish those tasks sooner."""
    import networkx as nx  # as the plan checks: with the first plan, not the records

    graph = nx.DiGraph()
    graph.add_nodes_from(tasks)
    graph.add_edges_from((d, t.id) for t in tasks.values() for d in t.dependencies if d in tasks)
    try:
        order = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:  # only skipped tasks escape the plan's cycle check
        return [], 0.0
    longest: dict[str, tuple[float, list[str]]] = {}
    for task_id in order:
        before = max(
            (longest[d] for d in graph.predecessors(task_id)), key=lambda p: p[0], default=(0.0, [])
        )
        longest[task_id] = (before[0] + _duration(tasks[task_id]), [*before[1], task_id])
    total, path = max(longest.values(), key=lambda p: p[0], default=(0.0, []))
    return (path, total) if total > 0 else ([], 0.0)


def _duration(task: Task) -> float:
    if task.started_at is None or task.ended_at is None:
        return 0.0
    return max(0.0, task.ended_at - task.started_at)


def render_timeline(timeline: Timeline, *, width: int = 50) -> str:
    """The timeline as text: one line per bar, ``x`` where a task's earlier attempts
    ran, ``.`` from its ready time to its start, ``#`` while it ran (``>`` to the right
    edge while it still runs), then its times; and the summary lines (time to first
    task, critical path)."""
    if not timeline.bars:
        return "(no timeline yet: nothing has run)"
    scale = width / max(timeline.elapsed_s, 1e-9)

    def column(at: float) -> int:
        return min(width - 1, int(at * scale))

    def draw(strip: list[str], mark: str, start: float, end: float | None) -> None:
        last = width if end is None else max(column(start) + 1, min(width, round(end * scale)))
        strip[column(start) : last] = mark * (last - column(start))

    label_width = max(len(_label(bar)) for bar in timeline.bars)
    lines = []
    for bar in timeline.bars:
        strip = [" "] * width
        for start, end in bar.earlier:
            draw(strip, "x", start, end)
        if bar.ready is not None and column(bar.ready) < column(bar.start):
            draw(strip, ".", bar.ready, bar.start)
        draw(strip, "#" if bar.end is not None else ">", bar.start, bar.end)
        lines.append(f"{_label(bar):<{label_width}} |{''.join(strip)}| {_times(bar)}")
    lines.append(f"elapsed {_seconds(timeline.elapsed_s)}")
    if timeline.time_to_first_task_s is not None:
        lines.append(f"time to first task {_seconds(timeline.time_to_first_task_s)}")
    if timeline.critical_path:
        chain = " -> ".join(timeline.critical_path)
        lines.append(f"critical path {_seconds(timeline.critical_path_s)}: {chain}")
    return "\n".join(lines)


def _label(bar: Bar) -> str:
    return f"{bar.name} ({bar.status})" if bar.kind == "task" else bar.kind


def _times(bar: Bar) -> str:
    span = f"{_seconds(bar.start)}-{'' if bar.end is None else _seconds(bar.end)}"
    if bar.end is not None:
        span += f" ({_seconds(bar.end - bar.start)})"
    else:
        span += "running"
    if bar.ready is not None and bar.start - bar.ready >= 0.0005:
        span += f", ready at {_seconds(bar.ready)}"
    if bar.tool_calls or bar.tools:
        span += f", {counted(bar.tool_calls, 'tool call')}"
        took = _seconds(sum(end - start for _, start, end in bar.tools))
        # Fewer ran in the attempt drawn than the task made: refused, or in other attempts.
        span += (
            f" {took}" if len(bar.tools) == bar.tool_calls else f" ({len(bar.tools)} timed: {took})"
        )
    if bar.earlier:
        span += f", after {counted(len(bar.earlier), 'failed attempt')}"
    return span


def local_time(at: float) -> str:
    """An epoch time as the local date and time, with the zone."""
    return datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def duration_text(seconds: float) -> str:
    """Whole ``seconds`` in hours, minutes and seconds, the larger units only when
    needed: ``42 s``, ``1 min 5 s``, ``2 h 0 min 3 s``."""
    hours, rest = divmod(round(seconds), 3600)
    minutes, whole = divmod(rest, 60)
    parts = [f"{hours} h"] if hours else []
    parts += [f"{minutes} min"] if minutes or hours else []
    return " ".join([*parts, f"{whole} s"])


def counted(number: int, thing: str) -> str:
    """``number`` ``thing``, plural unless one: ``1 tool call``, ``2 tool calls``."""
    return f"{number} {thing}" + ("s" if number != 1 else "")


def _seconds(value: float) -> str:
    return f"{value:.3f}s" if value < 10 else f"{value:.1f}s"
