"""Where a run's time went, from fixed timestamps: task stamping, the timeline, time
to first task, the critical path and the text Gantt chart (aimegraph.state.timing)."""

from __future__ import annotations

from typing import Any

from aimegraph.checkpoints import make_serializer
from aimegraph.state import Span, Task, critical_path, render_timeline, run_timeline
from aimegraph.state.timing import stamp_ready, start_attempt

T0 = 1_700_000_000.0
"""The run's start (epoch seconds): every time below is an offset from it."""


def ran(task_id: str, start: float, end: float, *deps: str, ready: float | None = None) -> Task:
    return Task(
        id=task_id,
        title=f"Task {task_id}",
        dependencies=deps,
        status="completed",
        ready_at=T0 + (start if ready is None else ready),
        started_at=T0 + start,
        ended_at=T0 + end,
    )


def state(*tasks: Task, spans: list[Span] | None = None) -> dict[str, Any]:
    return {"tasks": {t.id: t for t in tasks}, "spans": spans or [], "run_started_at": T0}


def test_a_committed_plan_makes_only_tasks_with_finished_inputs_ready() -> None:
    done = Task(id="a", title="A", status="completed", ended_at=T0 + 1)
    plan = {
        "b": Task(id="b", title="B", dependencies=("a",)),
        "c": Task(id="c", title="C", dependencies=("b",)),
        "d": Task(id="d", title="D"),
    }
    stamped = stamp_ready(plan, {"a": done}, at=T0 + 5)
    assert stamped["b"].ready_at == T0 + 5 and stamped["d"].ready_at == T0 + 5
    assert stamped["c"].ready_at is None  # ready when b ends


def test_a_started_task_was_ready_when_its_last_dependency_ended() -> None:
    tasks = {
        "a": ran("a", 0, 2),
        "b": ran("b", 0, 3),
        "c": Task(id="c", title="C", dependencies=("a", "b")),
    }
    started = start_attempt(tasks["c"], tasks, at=T0 + 4)
    assert started.status == "in_progress" and started.attempts == 1
    assert (started.ready_at, started.started_at) == (T0 + 3, T0 + 4)
    assert started.ended_at is None and started.tool_spans == ()


def test_a_retry_is_ready_when_its_failed_attempt_ended_and_restarts_its_clock() -> None:
    spans = (Span(name="calculator", started_at=T0 + 1, ended_at=T0 + 2),)
    failed = Task(
        id="a", title="A", status="failed", attempts=1, ready_at=T0, started_at=T0 + 0.5,
        ended_at=T0 + 3, tool_spans=spans,
    )  # fmt: skip
    retried = failed.retried()
    assert retried.status == "pending" and retried.ready_at == T0 + 3
    again = start_attempt(retried, {"a": retried}, at=T0 + 3.5)
    assert (again.ready_at, again.started_at, again.ended_at) == (T0 + 3, T0 + 3.5, None)
    assert again.attempts == 2 and again.tool_spans == ()


def test_ready_never_comes_after_started() -> None:
    # A stamp from another clock (a later ready time) is held at the start.
    task = Task(id="a", title="A", ready_at=T0 + 9)
    started = start_attempt(task, {"a": task}, at=T0 + 2)
    assert started.ready_at == started.started_at == T0 + 2


def test_critical_path_is_the_longest_chain_by_duration_not_by_length() -> None:
    # a(1 s) -> b(1 s) -> c(1 s) is the longest chain in tasks, x(5 s) -> y(0.5 s) in time.
    tasks = {
        t.id: t
        for t in (
            ran("a", 0, 1),
            ran("b", 1, 2, "a"),
            ran("c", 2, 3, "b"),
            ran("x", 0, 5),
            ran("y", 5, 5.5, "x"),
        )
    }
    path, seconds = critical_path(tasks)
    assert path == ["x", "y"] and seconds == 5.5


def test_critical_path_of_tasks_that_never_ran_is_empty() -> None:
    assert critical_path({"a": Task(id="a", title="A")}) == ([], 0.0)
    assert critical_path({}) == ([], 0.0)


def test_timeline_from_fixed_times() -> None:
    planner = Span(name="planner", started_at=T0 + 0.25, ended_at=T0 + 1.0)
    verifier = Span(name="verifier", started_at=T0 + 4.5, ended_at=T0 + 5.0)
    tool_call = Span(name="calculator", started_at=T0 + 1.5, ended_at=T0 + 1.75)
    a = ran("a", 1.25, 2.0).model_copy(update={"tool_spans": (tool_call,)})
    b = ran("b", 1.5, 3.0)
    c = ran("c", 3.5, 4.0, "a", "b", ready=3.0)
    running = Task(id="d", title="D", status="in_progress", ready_at=T0 + 4, started_at=T0 + 4)
    timeline = run_timeline(state(c, a, b, running, spans=[verifier, planner]))

    assert [bar.name for bar in timeline.bars] == ["planner", "a", "b", "c", "d", "verifier"]
    assert timeline.time_to_first_task_s == 1.25
    assert timeline.critical_path == ["b", "c"] and timeline.critical_path_s == 2.0
    assert timeline.elapsed_s == 5.0
    c_bar = next(bar for bar in timeline.bars if bar.name == "c")
    assert (c_bar.ready, c_bar.start, c_bar.end) == (3.0, 3.5, 4.0)
    a_bar = next(bar for bar in timeline.bars if bar.name == "a")
    assert a_bar.tools == (("calculator", 1.5, 1.75),)
    assert next(bar for bar in timeline.bars if bar.name == "d").end is None
    assert timeline.as_dict()["bars"][0] == {
        "kind": "planner", "name": "planner", "start": 0.25, "end": 1.0, "ready": None,
        "title": "", "status": "", "tools": (), "earlier": (), "tool_calls": 0,
    }  # fmt: skip


def test_a_retried_tasks_failed_attempts_stay_on_its_strip_and_count_as_its_start() -> None:
    first = Task(
        id="a", title="A", status="failed", attempts=1, ready_at=T0, started_at=T0 + 2,
        ended_at=T0 + 4,
    )  # fmt: skip
    second = start_attempt(first.retried(), {}, at=T0 + 6)
    assert second.past_attempts[0].name == "attempt 1" and second.ready_at == T0 + 4
    done = second.model_copy(update={"status": "completed", "ended_at": T0 + 10})
    timeline = run_timeline(state(done, ran("b", 3, 5)))
    assert timeline.time_to_first_task_s == 2
    assert [bar.name for bar in timeline.bars] == ["a", "b"]
    assert timeline.bars[0].earlier == ((2, 4),) and timeline.bars[0].start == 6
    assert render_timeline(timeline, width=10).splitlines()[0] == (
        "a (completed) |  xx..####| 6.000s-10.0s (4.000s), ready at 4.000s, after 1 failed attempt"
    )


def test_timeline_of_a_run_from_before_timestamps_is_empty() -> None:
    old = {"tasks": {"a": Task(id="a", title="A", status="completed")}}
    timeline = run_timeline(old)
    assert timeline.bars == [] and timeline.time_to_first_task_s is None
    assert render_timeline(timeline) == "(no timeline yet: nothing has run)"


def test_text_timeline_draws_waits_runs_and_the_summary() -> None:
    planner = Span(name="planner", started_at=T0, ended_at=T0 + 2)
    text = render_timeline(
        run_timeline(state(ran("a", 2, 6), ran("b", 6, 10, "a", ready=4), spans=[planner])),
        width=10,
    )
    lines = text.splitlines()
    assert lines[0] == "planner       |##        | 0.000s-2.000s (2.000s)"
    assert lines[1] == "a (completed) |  ####    | 2.000s-6.000s (4.000s)"
    assert lines[2] == "b (completed) |    ..####| 6.000s-10.0s (4.000s), ready at 4.000s"
    assert lines[3:] == [
        "elapsed 10.0s",
        "time to first task 2.000s",
        "critical path 8.000s: a -> b",
    ]


def test_tasks_written_before_timestamps_still_load_and_spans_survive_a_checkpoint() -> None:
    # A task as an earlier version stored it: no timestamp fields.
    old = Task.model_validate({"id": "a", "title": "A", "status": "completed", "attempts": 1})
    assert old.ready_at is None and old.started_at is None and old.tool_spans == ()

    serde = make_serializer()
    task = ran("a", 0, 1).model_copy(
        update={"tool_spans": (Span(name="calc", started_at=T0, ended_at=T0 + 0.5),)}
    )
    spans = [Span(name="planner", started_at=T0, ended_at=T0 + 1)]
    revived_task, revived_spans = serde.loads_typed(serde.dumps_typed((task, spans)))
    assert revived_task == task and revived_spans == spans
    assert revived_task.tool_spans[0].duration_s == 0.5
