"""Issue 29: stopping a run safely, and carrying on. A signal (or a drain asked
for from another thread) stops a run at a step boundary, from the CLI and from
Python: the calls in flight finish and are kept, nothing that depends on them
starts, and a resume does each step once; a second signal abandons the calls in
flight. A step saved without the checkpoint after it (the process died) is
resumable everywhere.

The harness (the scripted plan t0 -> (a, b) -> c, its logged ``step`` tool, ``Env``)
is in ``run_control_env.py``, the ``env`` fixture in ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl
from tests.integration.run_control_env import (
    DEPENDENTS,
    SCENARIO,
    TASKS,
    Env,
    _spec,
    cli,
    wait_until_saved,
)

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, run_config, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.steering import resume_inputs


def each_once(env: Env) -> Counter[tuple[str, str]]:
    return Counter({(t, e): 1 for t in TASKS for e in ("start", "end")})


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
