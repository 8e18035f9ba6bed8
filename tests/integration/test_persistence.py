"""Crash-safe resume and runs shared across processes, on real SQLite files and
the real Postgres server.

* A run SIGKILLed in the middle resumes with ``aimegraph resume``; the tools'
  side-effect log proves that no task that had completed ran again.
* A run that crashes in-process resumes with ``graph.invoke(None, config)`` from a
  freshly opened checkpointer, whichever task it crashed in.
* With Postgres, one process starts a run that pauses for plan approval, another
  resumes it; many threads run at once against one database.

The Postgres server defaults to ``postgresql://postgres@127.0.0.1:5432/test``
(override with ``AIMEGRAPH_TEST_POSTGRES_URL``); when it cannot be reached these
tests skip locally and fail when ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.types import Command
from tests.host import left_running
from tests.integration.run_control_env import wait_until_saved
from tests.scripted import call, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import (
    latest_settings,
    list_threads,
    new_thread_id,
    open_checkpointer,
    run_config,
    thread_config,
)
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.cli import main
from aimegraph.models import ScriptedChatModel
from aimegraph.waits import NO_DEADLINE

SCENARIOS = Path(__file__).parent.parent / "data" / "scenarios"
CLI = [sys.executable, "-m", "aimegraph.cli"]


def aimegraph(*args: str, cwd: Path, **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``aimegraph ARGS`` as its own process."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen([*CLI, *args], cwd=cwd, env=env, **popen)


def finish(proc: subprocess.Popen[bytes], timeout: float = 60) -> tuple[int, Any]:
    """Wait for a ``--json`` command; its exit code and parsed output."""
    out, err = proc.communicate(timeout=timeout)
    try:
        return proc.returncode, json.loads(out)
    except ValueError:
        pytest.fail(f"exit {proc.returncode}, no JSON on stdout: {out!r}\nstderr: {err!r}")


def log_events(log: Path) -> list[tuple[str, str, int]]:
    """(task, "start" | "end", pid) for each line the tools wrote."""
    if not log.exists():
        return []
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(r[0], r[1], int(r[2])) for r in rows if len(r) == 3]


# --- SIGKILL and resume ---


def kill_once_saved(
    run: subprocess.Popen[bytes],
    log: Path,
    events: set[tuple[str, str]],
    *,
    url: str,
    saved: str,
    timeout_s: float = 60,
) -> list[tuple[str, str]]:
    """SIGKILL ``run`` once ``log`` shows ``events`` and the store at ``url`` holds task
    ``saved``'s result, as a machine crash would; the events seen at the kill. Nothing
    of the run may outlive it (its sandboxed calls die with it)."""
    workspace = log.parent
    try:
        deadline = time.monotonic() + timeout_s
        while events - {(t, e) for t, e, _ in log_events(log)}:
            assert run.poll() is None, f"the run ended early (exit {run.returncode})"
            assert time.monotonic() < deadline, f"the run did not get going: {log_events(log)}"
            time.sleep(0.05)
        wait_until_saved(url, "killed", saved, timeout=timeout_s)
        seen = [(t, e) for t, e, _ in log_events(log)]
    finally:
        run.kill()  # SIGKILL: no cleanup, no final checkpoint
        run.wait()
    assert run.returncode == -signal.SIGKILL
    assert left_running(workspace) == {}
    (workspace / "go").touch()  # what waits for it runs through on resume
    return seen


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_runs_no_completed_task_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, log = tmp_path / "ws", tmp_path / "ws" / "log.txt"
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    run = aimegraph(
        "--checkpoints", url, "run", "Run four logged steps.",
        "--model", f"scripted:{SCENARIOS / 'crash.yaml'}", "--thread", "killed",
        "--workspace", str(workspace), "--durability", "sync", "--json",
        # The executor's crash (test_streamed_plan_crash.py has the planner's).
        "--config", '{"stream_plans": false}',
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # t0 -> (a quick, b waiting for the file go) -> c: kill once a is done and saved
    # (its actor has submitted and its write reached the checkpoint) and b waits.
    seen = kill_once_saved(run, log, {("a", "end"), ("b", "start")}, url=url, saved="a")
    assert ("b", "end") not in seen and ("c", "start") not in seen
    before = Counter((t, e) for t, e, _ in log_events(log))
    assert before == {("t0", "start"): 1, ("t0", "end"): 1, ("a", "start"): 1,
                      ("a", "end"): 1, ("b", "start"): 1}  # fmt: skip

    # What the store says now: stopped mid-way, a's result kept as a pending write.
    with open_checkpointer(url) as saver:
        settings = latest_settings(saver, "killed")
        graph = build_aime_graph(settings.model, config=settings.config, checkpointer=saver)
        snapshot = graph.get_state(run_config("killed"))
        assert snapshot.values["status"] == "running" and snapshot.interrupts == ()
        assert snapshot.next == ("executor",)
        if settings.config.scheduler == "eager":
            # One executor step runs them all: t0's and a's results are saved as the
            # step's pending writes; b, started inside the step and in flight, is
            # still pending in the state and is all that is left to run. Shown, it is
            # in progress (its actor had checkpointed), as the batch scheduler has it.
            assert snapshot.values["tasks"]["b"].status == "pending"
            tasks = with_finished_tasks(snapshot, saver).values["tasks"]
            assert {t: tasks[t].status for t in ("t0", "a", "b")} == {
                "t0": "completed",
                "a": "completed",
                "b": "in_progress",
            }
        else:
            assert snapshot.values["tasks"]["t0"].status == "completed"
            # Two executors in the interrupted step: a's finished (its result is kept),
            # b's was in flight and is all that is left to run.
            assert [t.name for t in snapshot.tasks] == ["executor", "executor"]
            assert sum(t.result is not None for t in snapshot.tasks) == 1
        # Not ended, and no live process holds it (the lease died with the runner).
        assert {t.thread_id: t.as_dict()["status"] for t in list_threads(saver)} == {
            "killed": "stopped"
        }

    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main(["--checkpoints", url, "show", "killed"]) == 0
    shown = capsys.readouterr().out
    assert "status: stopped" in shown and "- [x] t0: First step" in shown
    assert "carry on with: aimegraph resume killed" in shown

    code, summary = finish(aimegraph("--checkpoints", url, "resume", "killed", "--json",
                                     cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE))  # fmt: skip
    assert code == 0 and summary["status"] == "succeeded"
    assert {tid: t["status"] for tid, t in summary["tasks"].items()} == dict.fromkeys(
        ("t0", "a", "b", "c"), "completed"
    )
    assert summary["tasks"]["b"]["attempts"] == 1  # redone in place, not a retry
    after = Counter((t, e) for t, e, _ in log_events(log))
    # Completed before the kill: exactly once. In flight: redone. After: once.
    assert after == {("t0", "start"): 1, ("t0", "end"): 1, ("a", "start"): 1, ("a", "end"): 1,
                     ("b", "start"): 2, ("b", "end"): 1, ("c", "start"): 1, ("c", "end"): 1}  # fmt: skip


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing handles it."""


def _crash_scenario() -> dict[str, Any]:
    def step(task: str) -> list[dict[str, Any]]:
        return [call("side_effect", task=task), submit(f"{task} ok")]

    def custom(id: str, *deps: str) -> dict[str, Any]:
        return spec(id, *deps, tool_bundles=["custom"])

    return {
        "planner": [
            {
                "rationale": "r",
                "tasks": [
                    custom("t0"),
                    custom("a", "t0"),
                    custom("b", "t0"),
                    custom("c", "a", "b"),
                ],
            }
        ],  # fmt: skip
        "actors": {t: step(t) for t in ("t0", "a", "b", "c")},
        "reporter": [{"text": "{all_results}"}],
    }


@pytest.mark.parametrize("crash_in", ["t0", "b", "c"])
def test_crashed_run_resumes_with_invoke_none_from_a_fresh_checkpointer(
    tmp_path: Path, crash_in: str
) -> None:
    calls: list[str] = []
    crashed = threading.Event()

    @tool
    def side_effect(task: str) -> str:
        """Record that a task did its work."""
        if task == "b":
            time.sleep(0.5)  # its sibling a finishes first
        calls.append(task)
        if task == crash_in and not crashed.is_set():
            crashed.set()
            raise Crash(task)
        return f"{task} recorded"

    url = f"sqlite:///{tmp_path / 'cp.db'}"
    config = thread_config("crash")
    cfg = AimeConfig(workspace=tmp_path)

    def graph(saver: Any) -> Any:
        model = ScriptedChatModel.from_dict(_crash_scenario())
        return build_aime_graph(model, tools=[side_effect], config=cfg, checkpointer=saver)

    with open_checkpointer(url) as saver, pytest.raises(Crash):
        graph(saver).invoke({"goal": "four steps"}, config, durability="sync")
    assert calls.count(crash_in) == 1

    with open_checkpointer(url) as saver:  # as a new process would
        out = graph(saver).invoke(None, config)
    assert out["status"] == "succeeded"
    assert all(t.status == "completed" for t in out["tasks"].values())
    # Every task did its work once, except the one in flight, which was redone.
    assert Counter(calls) == {t: 2 if t == crash_in else 1 for t in ("t0", "a", "b", "c")}


def test_resume_of_a_python_started_thread_needs_no_cli_settings(tmp_path: Path) -> None:
    """A run started from Python (no CLI settings) still resumes from Python after
    a restart; the CLI reads it too (issue 11: tests/integration/test_cli_python_threads.py)."""
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    scenario = {"planner": [{"rationale": "r", "tasks": [{"id": "a", "title": "A"}]}]}
    cfg = AimeConfig(workspace=tmp_path, approve_plan=True)
    with open_checkpointer(url) as saver:
        graph = build_aime_graph(ScriptedChatModel.from_dict(scenario), config=cfg,
                                 checkpointer=saver)  # fmt: skip
        assert graph.invoke({"goal": "g"}, thread_config("py"))["__interrupt__"]
    assert main(["--checkpoints", url, "show", "py"]) == 0
    with open_checkpointer(url) as saver:
        graph = build_aime_graph(ScriptedChatModel.from_dict(scenario), config=cfg,
                                 checkpointer=saver)  # fmt: skip
        out = graph.invoke(Command(resume={"action": "approve"}), thread_config("py"))
    assert out["status"] == "succeeded"


# --- Postgres ---


@pytest.fixture
def pg_threads(postgres_url: str) -> Iterator[list[str]]:
    """Thread ids the test uses (append to the list); their rows are deleted afterwards."""
    ids: list[str] = []
    yield ids
    with open_checkpointer(postgres_url) as saver:
        for tid in ids:
            saver.delete_thread(tid)


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_run_paused_in_one_process_is_finished_by_another(
    postgres_url: str, pg_threads: list[str], tmp_path: Path
) -> None:
    thread = new_thread_id("pytest-handover-")
    pg_threads.append(thread)
    common = ("--checkpoints", postgres_url)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    first = tmp_path / "machine-1"
    first.mkdir()
    code, summary = finish(aimegraph(
        *common, "run", "Multiply six by seven", "--model",
        f"scripted:{SCENARIOS / 'two_tasks.yaml'}", "--thread", thread, "--approve-plan",
        "--workspace", str(tmp_path / "ws"), "--json", cwd=first, **pipes,
    ))  # fmt: skip
    assert code == 5 and summary["status"] == "paused"
    assert summary["interrupts"][0]["kind"] == "approve_plan"

    # Another process, in another directory, knows the thread only by its id.
    second = tmp_path / "machine-2"
    second.mkdir()
    code, summary = finish(
        aimegraph(*common, "resume", thread, "--approve", "--json", cwd=second, **pipes)
    )
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["final_answer"] == "Answer: six times seven is the product is 42"

    with open_checkpointer(postgres_url) as saver:
        settings = latest_settings(saver, thread)
        assert settings.config.approve_plan and settings.model.endswith("two_tasks.yaml")
        graph = build_aime_graph(settings.model, config=settings.config, checkpointer=saver)
        history = list(graph.get_state_history(run_config(thread)))
        assert history[0].values["status"] == "succeeded" and history[0].next == ()
        assert any(snap.interrupts for snap in history)  # the pause is in the history


@pytest.mark.postgres
def test_many_threads_run_concurrently_against_one_postgres(
    postgres_url: str, pg_threads: list[str], tmp_path: Path
) -> None:
    n = 6
    threads = [new_thread_id(f"pytest-many{i}-") for i in range(n)]
    pg_threads.extend(threads)

    def scenario(i: int) -> dict[str, Any]:
        tasks = [{"id": f"t{i}", "title": f"Step of run {i}"}, {"id": "z", "title": "Ask",
                 "tool_bundles": ["human"]}]  # fmt: skip
        return {
            "planner": [{"rationale": f"run {i}", "tasks": tasks}],
            "actors": {
                f"t{i}": [{"tool": "submit_result",
                           "args": {"status": "completed", "summary": f"result {i}"}}],
                "z": [{"tool": "ask_human", "args": {"question": f"question {i}?"}},
                      {"tool": "submit_result",
                       "args": {"status": "completed", "summary": "{last_tool_output}"}}],
            },
            "reporter": [{"text": "{all_results}"}],
        }  # fmt: skip

    def start(i: int) -> Any:
        with open_checkpointer(postgres_url) as saver:  # one connection pool each
            graph = build_aime_graph(
                ScriptedChatModel.from_dict(scenario(i)),
                config=AimeConfig(workspace=tmp_path, approve_plan=True),
                checkpointer=saver,
            )
            config = thread_config(threads[i])
            graph.invoke({"goal": f"goal {i}"}, config)
            graph.invoke(Command(resume="approve"), config)  # then ask_human pauses
            (question,) = graph.get_state(config).interrupts
            assert (
                question.value == {"kind": "ask_human", "question": f"question {i}?"} | NO_DEADLINE
            )
            return graph.invoke(Command(resume={question.id: f"answer {i}"}), config)

    with ThreadPoolExecutor(max_workers=n) as pool:
        outs = list(pool.map(start, range(n)))

    for i, out in enumerate(outs):
        assert out["status"] == "succeeded" and out["goal"] == f"goal {i}"
        assert set(out["tasks"]) == {f"t{i}", "z"}
        assert out["tasks"][f"t{i}"].result.summary == f"result {i}"
        assert out["tasks"]["z"].result.summary == f"answer {i}"
    with open_checkpointer(postgres_url) as saver:
        listed = {t.thread_id: t for t in list_threads(saver, limit=10_000)}
        for i, tid in enumerate(threads):
            assert listed[tid].goal == f"goal {i}" and listed[tid].status == "succeeded"
