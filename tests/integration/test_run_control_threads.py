"""Issue 29: one runner per thread, a live run against a stopped one, and cancel.
A live runner holds its thread's lease: other runs and resumes are refused (or,
with ``--wait``, queue behind it), ``threads`` and ``show`` report it running, and
a cancel ends it at the next step; paused runs are cancelled at once. Two resumes
of a killed run race for the lease, and each step runs once. Python embedders
hold the same lease.

The harness (the scripted plan t0 -> (a, b) -> c, its logged ``step`` tool, ``Env``)
is in ``run_control_env.py``, the ``env`` fixture in ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest
from langgraph.runtime import RunControl
from tests.integration.run_control_env import DEPENDENTS, SCENARIO, Env, cli, wait_until_saved

from aimegraph import AimeConfig, ThreadBusyError, build_aime_graph, hold_thread
from aimegraph.checkpoints import open_checkpointer, run_config, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.steering import cancel_run, run_thread

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
