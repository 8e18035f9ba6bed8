"""Issue 29: operating runs safely. Stopping a run by a signal (CLI and Python), one
runner per thread, live against stopped, cancelling, and the safety settings that
stay with a thread whichever entry point started it.

The runs use a scripted plan t0 -> (a, b) -> c whose actors each call one tool,
``step``, that appends "<task> start <pid>" and "<task> end <pid>" to a log: the
side effects to count. The tool can hold its task in flight (``RC_HOLD_AT``): until
the run is asked to drain (its ``RunControl``, read from the runtime), or, with
``RC_HOLD_MODE=go``, until a file appears. The tests wait for these markers, never
for time to pass. Processes are real ``aimegraph`` (or Python) processes; the
resumes run in-process (``main([...])``), which opens the store as a new
invocation would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from aimegraph import AimeConfig, ThreadBusyError, build_aime_graph, hold_thread
from aimegraph.checkpoints import open_checkpointer, run_config, thread_config
from aimegraph.checkpoints.delta import finished_tasks
from aimegraph.cli import main
from aimegraph.models import ScriptedChatModel
from aimegraph.steering import cancel_run, resume_inputs, run_thread

TOOLS_MODULE = '''
"""The tests' side effects: one logged step per task, which can be held in flight."""
import os, time
from pathlib import Path

from langchain_core.tools import tool
from langgraph.runtime import get_runtime


def log(task: str, event: str) -> None:
    fd = os.open(os.environ["RC_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{task} {event} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)


@tool
def step(task: str) -> str:
    """Do the task's one side effect."""
    log(task, "start")
    if task == os.environ.get("RC_HOLD_AT"):
        control = get_runtime().control
        go = Path(os.environ.get("RC_GO", "/nonexistent"))
        by_go = os.environ.get("RC_HOLD_MODE") == "go"
        deadline, said = time.monotonic() + 30, False
        while time.monotonic() < deadline:
            if control.drain_requested and not said:
                log(task, "drained")
                said = True
            if go.exists() or (said and not by_go):
                break
            time.sleep(0.01)
    log(task, "end")
    return f"{task} done"


@tool
def danger(item: str) -> str:
    """Do something that needs a human's approval."""
    log(item, "danger")
    return f"{item} done"


TOOLS = [step, danger]
'''

TASKS = ("t0", "a", "b", "c")


def _spec(task: str, *deps: str) -> dict[str, Any]:
    return {"id": task, "title": f"Step {task}", "dependencies": list(deps),
            "tool_bundles": ["custom"]}  # fmt: skip


SCENARIO: dict[str, Any] = {
    "goal": "Run the four logged steps.",
    "any_goal": True,  # the tests run it with goals of their own
    "planner": [
        {
            "rationale": "a and b are independent; c needs both",
            "tasks": [_spec("t0"), _spec("a", "t0"), _spec("b", "t0"), _spec("c", "a", "b")],
        }
    ],
    "actors": {
        t: [
            {"tool": "step", "args": {"task": t}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": f"{t} ok"}},
        ]
        for t in TASKS
    },
    "reporter": [{"text": "{all_results}"}],
}

DANGER_SCENARIO: dict[str, Any] = {
    "goal": "Do the dangerous thing.",
    "any_goal": True,  # the tests run it with goals of their own
    "planner": [{"rationale": "one task", "tasks": [_spec("d")]}],
    "actors": {
        "d": [
            {"tool": "danger", "args": {"item": "d"}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": "d ok"}},
        ]
    },
    "reporter": [{"text": "{all_results}"}],
}

CLI = [sys.executable, "-m", "aimegraph.cli"]


@dataclass
class Env:
    """One test's files: the tools module, the scenarios, the side-effect log."""

    tmp: Path
    url: str
    model: str
    danger_model: str
    log: Path
    go: Path
    workspace: Path

    def environ(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.tmp), os.environ.get("PYTHONPATH", "")])
        return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **extra}

    def start(self, *argv: str, hold_at: str | None = None, mode: str = "drain",
              url: str | None = None) -> subprocess.Popen[str]:  # fmt: skip
        """``aimegraph --checkpoints URL ARGV`` as a process of its own."""
        extra = {"RC_HOLD_AT": hold_at, "RC_HOLD_MODE": mode, "RC_GO": str(self.go)}
        extra = extra if hold_at else {}
        return subprocess.Popen(
            [*CLI, "--checkpoints", url or self.url, *argv],
            cwd=self.tmp,
            env=self.environ(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, thread: str, *extra: str, hold_at: str | None = None, mode: str = "drain",
            url: str | None = None) -> subprocess.Popen[str]:  # fmt: skip
        return self.start(
            "run", SCENARIO["goal"], "--model", self.model, "--thread", thread,
            "--tools", "rc_tools:TOOLS", "--workspace", str(self.workspace), "--json", *extra,
            hold_at=hold_at, mode=mode, url=url,
        )  # fmt: skip

    def events(self) -> Counter[tuple[str, str]]:
        if not self.log.exists():
            return Counter()
        return Counter(tuple(line.split()[:2]) for line in self.log.read_text().splitlines())

    def wait_for(self, *wanted: tuple[str, str], proc: subprocess.Popen[str] | None = None,
                 timeout: float = 30) -> None:  # fmt: skip
        """Until the log shows every ``(task, event)`` in ``wanted``."""
        deadline = time.monotonic() + timeout
        while not all(self.events()[w] for w in wanted):
            if proc is not None and proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"exit {proc.returncode} before {wanted}: {err[-2000:]}")
            assert time.monotonic() < deadline, f"no {wanted} in the log: {self.events()}"
            time.sleep(0.02)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    (tmp_path / "rc_tools.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rc_tools", raising=False)
    scenario, danger = tmp_path / "steps.yaml", tmp_path / "danger.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    danger.write_text(yaml.safe_dump(DANGER_SCENARIO))
    log = tmp_path / "log.txt"
    monkeypatch.setenv("RC_LOG", str(log))
    monkeypatch.delenv("RC_HOLD_AT", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Env(
        tmp=tmp_path,
        url=f"sqlite:///{tmp_path / 'cp.db'}",
        model=f"scripted:{scenario}",
        danger_model=f"scripted:{danger}",
        log=log,
        go=tmp_path / "go",
        workspace=tmp_path / "ws",
    )


def cli(capsys: pytest.CaptureFixture[str], env: Env, *argv: str) -> tuple[int, str, str]:
    """``aimegraph --checkpoints URL ARGV`` in-process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--checkpoints", env.url, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def each_once(env: Env) -> Counter[tuple[str, str]]:
    return Counter({(t, e): 1 for t in TASKS for e in ("start", "end")})


def wait_until_saved(url: str, thread: str, task: str, timeout: float = 30) -> None:
    """Until the running step's saved writes hold ``task``'s result (its actor has
    submitted after its tool, and the store has it)."""
    with open_checkpointer(url) as saver:
        deadline = time.monotonic() + timeout
        while task not in finished_tasks(saver.get_tuple(run_config(thread))):
            assert time.monotonic() < deadline, f"{task}'s result never reached the store"
            time.sleep(0.02)


DEPENDENTS = {"t0": ("a", "b", "c"), "a": ("c",), "b": ("c",), "c": ()}


# --- 1. stop on a signal ---


@pytest.mark.parametrize(
    ("sig", "point", "scheduler", "durability"),
    [
        (signal.SIGINT, "t0", "eager", "async"),
        (signal.SIGTERM, "a", "eager", "sync"),
        (signal.SIGINT, "c", "eager", "exit"),
        (signal.SIGTERM, "b", "batch", "async"),
    ],
)
def test_a_signal_stops_a_cli_run_at_a_step_boundary_then_resume_does_each_step_once(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    sig: int,
    point: str,
    scheduler: str,
    durability: str,
) -> None:
    config = json.dumps({"scheduler": scheduler})
    proc = env.run("stopped", "--config", config, "--durability", durability, hold_at=point)
    env.wait_for((point, "start"), proc=proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 128 + sig
    assert err.splitlines() == ["interrupted; carry on with: aimegraph resume stopped"]
    assert out == ""
    seen = env.events()
    # The call in flight finished (and was kept); nothing that depends on it started.
    assert seen[(point, "drained")] == 1 and seen[(point, "end")] == 1
    assert not any(seen[(t, "start")] for t in DEPENDENTS[point]), seen

    code, out, _ = cli(capsys, env, "threads", "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "stopped"
    code, out, _ = cli(capsys, env, "show", "stopped")
    assert "status: stopped" in out and "carry on with: aimegraph resume stopped" in out

    code, out, err = cli(capsys, env, "resume", "stopped", "--json")
    assert code == 0 and json.loads(out)["status"] == "succeeded", err
    # Every side effect exactly once: the stop lost nothing and redid nothing...
    expected = each_once(env)
    if durability == "exit":
        # ...except under `exit`, which saves at the end only: LangGraph saves a
        # drained subgraph (the actor in flight) as it saves a finished one, not at
        # all, so that actor's tool call is redone (as the README says).
        expected += Counter({(point, "start"): 1, (point, "end"): 1})
    assert env.events() - Counter({(point, "drained"): 1}) == expected


def test_a_second_signal_abandons_the_calls_in_flight(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = env.run("abandoned", hold_at="a", mode="go")  # a does not return by itself
    env.wait_for(("a", "start"), proc=proc)
    wait_until_saved(env.url, "abandoned", "b")  # b is done: only a is in flight
    proc.send_signal(signal.SIGINT)
    env.wait_for(("a", "drained"), proc=proc)  # the first signal asked the run to stop
    assert proc.poll() is None  # ...and it waits for a
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["interrupted; carry on with: aimegraph resume abandoned"]
    assert env.events()[("a", "end")] == 0  # abandoned, not waited for

    code, out, _ = cli(capsys, env, "resume", "abandoned", "--json")
    assert code == 0 and json.loads(out)["status"] == "succeeded"
    redone = env.events()
    assert redone[("a", "start")] == 2 and redone[("a", "end")] == 1  # the abandoned call
    assert all(redone[(t, e)] == 1 for t in ("t0", "b", "c") for e in ("start", "end")), redone


PYTHON_DRIVER = """
import signal, sys
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl
from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel
import yaml, rc_tools

scenario = yaml.safe_load(open(sys.argv[2]))
with open_checkpointer(sys.argv[1]) as saver:
    graph = build_aime_graph(ScriptedChatModel.from_dict(scenario), tools=rc_tools.TOOLS,
                             config=AimeConfig(workspace=sys.argv[3]), checkpointer=saver)
    if sys.argv[4] == "SIGTERM":  # as the README shows: a handler that asks for a drain
        control = RunControl()
        signal.signal(signal.SIGTERM, lambda *_: control.request_drain("SIGTERM"))
        try:
            for _ in graph.stream({"goal": "go"}, thread_config("py"), control=control):
                pass
        except GraphDrained:
            sys.exit(143)
    else:  # Ctrl-C: the graph drains by itself, then raises KeyboardInterrupt
        try:
            for _ in graph.stream({"goal": "go"}, thread_config("py")):
                pass
        except KeyboardInterrupt:
            sys.exit(130)
"""


@pytest.mark.parametrize(("sig", "point"), [(signal.SIGINT, "a"), (signal.SIGTERM, "t0")])
def test_a_python_stream_stops_at_a_step_boundary_then_invoke_none_does_each_step_once(
    env: Env, sig: int, point: str
) -> None:
    driver = env.tmp / "driver.py"
    driver.write_text(PYTHON_DRIVER)
    scenario = env.model.removeprefix("scripted:")
    proc = subprocess.Popen(
        [sys.executable, str(driver), env.url, scenario, str(env.workspace),
         signal.Signals(sig).name],
        cwd=env.tmp, env=env.environ(RC_HOLD_AT=point), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    env.wait_for((point, "start"), proc=proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert not any(env.events()[(t, "start")] for t in DEPENDENTS[point])

    import rc_tools  # type: ignore[import-not-found]

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(SCENARIO), tools=rc_tools.TOOLS,
            config=AimeConfig(workspace=env.workspace), checkpointer=saver,
        )  # fmt: skip
        assert graph.invoke(None, thread_config("py"))["status"] == "succeeded"
    assert env.events() - Counter({(point, "drained"): 1}) == each_once(env)


# --- 2. resume anything that has not ended ---


class _Crash(BaseException):
    """The process dying: not an Exception, so nothing handles it."""


def test_a_step_saved_without_its_checkpoint_is_resumable_everywhere(
    env: Env, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The batch scheduler's executor step finishes (its writes saved), then the
    # process dies before the checkpoint after it: `next` is empty, status running.
    import rc_tools

    class DiesAfterTheSteps(SqliteSaver):
        """Saves a step's writes; dies on the checkpoint after a task completed."""

        armed = False

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            super().put_writes(config, writes, task_id, task_path)
            done = [v for ch, v in writes if ch == "tasks" and isinstance(v, dict)]
            if not config["configurable"].get("checkpoint_ns") and any(
                t.status == "completed" for tasks in done for t in tasks.values()
            ):
                self.armed = True

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            if self.armed and not config["configurable"].get("checkpoint_ns"):
                raise _Crash
            return super().put(config, checkpoint, metadata, new_versions)

    one_task = {**SCENARIO, "planner": [{"rationale": "r", "tasks": [_spec("t0")]}]}
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(one_task))
    with open_checkpointer(env.url) as opened:
        saver = DiesAfterTheSteps(opened.conn, serde=opened.serde)  # type: ignore[attr-defined]
        graph = build_aime_graph(
            f"scripted:{path}", tools=rc_tools.TOOLS,
            config=AimeConfig(workspace=env.workspace, scheduler="batch"), checkpointer=saver,
        )  # fmt: skip
        with pytest.raises(_Crash):
            graph.invoke({"goal": "go"}, thread_config("saved"), durability="sync")
        snapshot = graph.get_state(run_config("saved"))
        assert snapshot.next == () and snapshot.values["status"] == "running"
        assert resume_inputs(snapshot) is None  # the steering API: carry on

        from aimegraph.distributed.runner import _next_inputs

        assert _next_inputs(snapshot, "go", None) is None  # a worker: carry on too

    code, out, _ = cli(capsys, env, "show", "saved")
    assert "status: stopped" in out and "carry on with: aimegraph resume saved" in out
    code, out, err = cli(capsys, env, "resume", "saved", "--json")
    assert code == 0 and json.loads(out)["status"] == "succeeded", err
    assert env.events() == Counter({("t0", "start"): 1, ("t0", "end"): 1})


# --- 3. one runner per thread, 4. live against stopped, 5. cancel ---


def test_a_live_runner_refuses_others_shows_as_running_and_cancel_ends_it(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    live = env.run("live", hold_at="a")  # a returns once the run is asked to stop
    env.wait_for(("a", "start"), proc=live)

    code, _, err = cli(capsys, env, "resume", "live")
    assert code == 9 and err.count("\n") == 1
    assert f"thread 'live' is being run by another process (pid {live.pid} on " in err
    code, _, err = cli(capsys, env, "run", "other goal", "--model", env.model, "--thread", "live")
    assert code == 9 and "aimegraph cancel live" in err

    code, out, _ = cli(capsys, env, "threads", "--json")
    (row,) = json.loads(out)
    assert row["status"] == "running" and f"pid {live.pid}" in row["holder"]
    code, out, _ = cli(capsys, env, "show", "live")
    assert "status: running" in out and "stop it with: aimegraph cancel live" in out
    assert "resume" not in out  # never suggests resuming a live run

    code, out, _ = cli(capsys, env, "cancel", "live", "--wait", "--reason", "wrong goal")
    assert (code, out.strip()) == (0, "cancelled live")
    live_out, live_err = live.communicate(timeout=60)
    assert live.returncode == 8, live_err
    assert json.loads(live_out)["status"] == "cancelled"
    assert not any(env.events()[(t, "start")] for t in DEPENDENTS["a"])  # nothing new started

    code, out, _ = cli(capsys, env, "show", "live", "--json")
    shown = json.loads(out)
    assert shown["status"] == "cancelled" and shown["usage"]["llm_calls"] > 0  # usage kept
    assert shown["reason"] == "wrong goal"  # the reason given, recorded by the runner
    assert cli(capsys, env, "resume", "live")[0] == 6
    assert cli(capsys, env, "cancel", "live")[0] == 6  # nothing left to cancel

    # A new goal on the cancelled thread starts afresh.
    code, out, err = cli(
        capsys, env, "run", "Again.", "--model", env.model, "--thread", "live",
        "--tools", "rc_tools:TOOLS", "--workspace", str(env.workspace), "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["status"] == "succeeded", err
    with open_checkpointer(env.url) as saver:
        reader = build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=env.workspace), checkpointer=saver
        )
        values = reader.get_state(run_config("live")).values
    (before,) = values["runs"]
    assert before["status"] == "cancelled" and before["usage"].llm_calls > 0
    assert values["goal"] == "Again." and values["status"] == "succeeded"


def test_cancel_a_paused_run_and_run_thread_semantics(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = cli(
        capsys, env, "run", "g", "--model", env.model, "--thread", "paused",
        "--tools", "rc_tools:TOOLS", "--workspace", str(env.workspace), "--approve-plan",
    )  # fmt: skip
    assert code == 5
    # A new goal on a thread whose run has not ended: resume or cancel it first.
    code, _, err = cli(capsys, env, "run", "other", "--model", env.model, "--thread", "paused")
    assert code == 2 and "waits for the approval of its plan" in err
    assert "aimegraph resume paused" in err and "aimegraph cancel paused" in err

    code, out, _ = cli(capsys, env, "cancel", "paused", "--reason", "changed my mind")
    assert (code, out.strip()) == (0, "cancelled paused")
    code, out, _ = cli(capsys, env, "show", "paused", "--json")
    shown = json.loads(out)
    assert shown["status"] == "cancelled" and shown["reason"] == "changed my mind"
    assert shown["interrupts"] == [] and shown["usage"]["llm_calls"] == 1  # the planner's
    assert cli(capsys, env, "resume", "paused", "--approve")[0] == 6
    assert cli(capsys, env, "cancel", "ghost")[0] == 6
    assert env.events() == Counter()  # nothing ran


def test_resume_wait_queues_behind_the_live_runner(env: Env) -> None:
    live = env.run("queued", hold_at="t0", mode="go")
    env.wait_for(("t0", "start"), proc=live)
    waiting = env.start("resume", "queued", "--wait", "--json")
    line = waiting.stderr.readline() if waiting.stderr else ""
    assert line.startswith("waiting: thread 'queued' is being run by another process")
    env.go.touch()
    assert live.wait(timeout=60) == 0
    _, err = waiting.communicate(timeout=60)
    # It waited for the run to end, then found nothing left to resume.
    assert waiting.returncode == 6 and "nothing to resume (status: succeeded)" in err


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_simultaneous_resumes_of_a_killed_run_do_each_step_once(
    env: Env, store: str, request: pytest.FixtureRequest
) -> None:
    url, thread = env.url, "killed"
    if store == "postgres":
        url = request.getfixturevalue("postgres_url")
        thread = f"killed-{os.getpid()}-{time.monotonic_ns()}"
    run = env.run(thread, "--durability", "sync", hold_at="b", mode="go", url=url)
    try:
        env.wait_for(("b", "start"), proc=run)
        wait_until_saved(url, thread, "a")  # a is done: only b is in flight
    finally:
        run.kill()  # SIGKILL: no cleanup; the lease goes with the process
        run.wait()

    resumes = [env.start("resume", thread, "--json", url=url) for _ in range(2)]
    outcomes = sorted((p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in resumes)
    (winner, _), (loser, said) = outcomes
    assert winner == 0
    assert (loser == 9 and "is being run by another process" in said) or (
        loser == 6 and "nothing to resume" in said
    ), said
    seen = env.events()
    # b was cut off mid-call by the kill, so it ran again; everything else once.
    assert seen[("b", "start")] == 2 and seen[("b", "end")] == 1
    assert all(seen[(t, e)] == 1 for t in ("t0", "a", "c") for e in ("start", "end")), seen
    if store == "postgres":
        with open_checkpointer(url) as saver:
            saver.delete_thread(thread)


def test_python_embedders_hold_the_lease_and_cancel(env: Env) -> None:
    import rc_tools

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(SCENARIO), tools=rc_tools.TOOLS,
            config=AimeConfig(workspace=env.workspace, approve_plan=True), checkpointer=saver,
        )  # fmt: skip
        config = thread_config("embedded")
        assert run_thread(graph, {"goal": "go"}, config)["proposal"] is not None  # paused
        with hold_thread(saver, "embedded"), pytest.raises(ThreadBusyError):
            run_thread(graph, None, config)  # someone else holds it: refused at once
        assert cancel_run(graph, "embedded") == "cancelled"
        state = graph.get_state(config)
        assert state.values["status"] == "cancelled" and not state.next
        assert graph.invoke(None, config)["status"] == "cancelled"  # not resumable
        # a live run: the cancel is a request, carried out at the next step
        control = RunControl()
        with hold_thread(saver, "live", control=control) as lease:
            assert cancel_run(graph, "live") == "requested"
            deadline = time.monotonic() + 5
            while not lease.control.drain_requested:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert lease.cancelled and control.drain_reason == "cancel"


# --- 6. safety settings stay with the thread ---


def _python_thread(env: Env, thread: str, *, context: dict[str, Any] | None = None,
                   **config: Any) -> None:  # fmt: skip
    """A run started from Python with the scripted model as an object (no spec stored)."""
    import rc_tools

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(DANGER_SCENARIO), tools=rc_tools.TOOLS,
            config=AimeConfig(workspace=env.workspace, **config), checkpointer=saver,
        )  # fmt: skip
        out = graph.invoke({"goal": "go"}, thread_config(thread), context=context)
        assert out["__interrupt__"]


def test_gates_set_in_python_hold_when_the_cli_resumes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    _python_thread(env, "gated", approve_plan=True, approve_tools=["danger"])
    code, out, err = cli(capsys, env, "resume", "gated", "--approve", "--model", env.danger_model)
    assert code == 5, err  # paused before the dangerous call, as Python asked
    assert "waiting (approve_tool)" in out and "danger" in out
    assert env.events() == Counter()

    # A per-run override given in Python (context=) is stored too.
    _python_thread(env, "context", approve_plan=True, context={"approve_tools": ["danger"]})
    code, out, err = cli(capsys, env, "resume", "context", "--approve", "--model", env.danger_model)
    assert code == 5 and "waiting (approve_tool)" in out, err

    # An override is explicit: said in one line, and it applies.
    code, out, err = cli(
        capsys, env, "resume", "context", "--approve", "--model", env.danger_model,
        "--config", '{"approve_tools": []}', "--json",
    )  # fmt: skip
    assert err.splitlines() == ["overrides: approve_tools: ['danger'] -> []"]
    assert code == 0 and json.loads(out)["status"] == "succeeded"


def test_budgets_and_a_model_spec_set_in_python_hold_when_the_cli_resumes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    import rc_tools

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            env.danger_model, tools=rc_tools.TOOLS,  # a spec: stored, so --model is not needed
            config=AimeConfig(workspace=env.workspace, approve_plan=True, max_llm_calls=2),
            checkpointer=saver,
        )  # fmt: skip
        assert graph.invoke({"goal": "go"}, thread_config("budget"))["__interrupt__"]
    code, out, err = cli(capsys, env, "resume", "budget", "--approve", "--json")
    shown = json.loads(out)
    # Counted from the run's start: the planner's call before the pause included.
    assert code == 4 and shown["status"] == "budget_exhausted", err
    assert shown["usage"]["llm_calls"] == 2


# --- the eager runner and the model nodes honour a drain ---


def test_a_drain_from_another_thread_stops_invoke_and_ainvoke(env: Env) -> None:
    import asyncio
    import threading

    import rc_tools

    def drained_at(point: str, call: Callable[[Any, RunControl], Any]) -> Counter[Any]:
        env.log.unlink(missing_ok=True)
        control = RunControl()
        os.environ["RC_HOLD_AT"] = point
        try:
            with open_checkpointer("memory") as saver:
                graph = build_aime_graph(
                    ScriptedChatModel.from_dict(SCENARIO), tools=rc_tools.TOOLS,
                    config=AimeConfig(workspace=env.workspace), checkpointer=saver,
                )  # fmt: skip
                stopper = threading.Thread(
                    target=lambda: (env.wait_for((point, "start")), control.request_drain())
                )
                stopper.start()
                with pytest.raises(GraphDrained):
                    call(graph, control)
                stopper.join()
        finally:
            del os.environ["RC_HOLD_AT"]
        return env.events()

    seen = drained_at("a", lambda g, c: g.invoke({"goal": "go"}, thread_config("t"), control=c))
    assert seen[("a", "end")] == 1 and seen[("c", "start")] == 0
    seen = drained_at(
        "t0",
        lambda g, c: asyncio.run(g.ainvoke({"goal": "go"}, thread_config("t"), control=c)),
    )
    assert seen[("t0", "end")] == 1 and not any(seen[(t, "start")] for t in ("a", "b", "c"))
