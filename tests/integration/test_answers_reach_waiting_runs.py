"""A timed human wait answered while its run waits (issue 47, point 1): ``aimegraph
run`` waiting on a plan approval, a tool approval, an ``ask_human`` question or an
escalation (600 s to answer, each default the one the test does not give) holds the
thread; an answer from ``aimegraph resume`` in another process, the dashboard's resume
API, A2A or MCP reaches it, and it carries the run on at once and exits 0. The waiting
process says what it waits for, the deadline, the default and the commands that
answer; ``show`` meanwhile prints a ``resume with:`` command that works."""

from __future__ import annotations

import json
import queue
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from tests.conftest import TWO_TASKS, Cli, cli_process
from tests.human_scenarios import ESCALATE, EVERY_WAIT, FAILING, scenario_spec

from aimegraph.checkpoints import open_checkpointer

pytestmark = pytest.mark.slow

TIMED = {"approval_timeout_s": 600, "ask_human_timeout_s": 600, "escalation_timeout_s": 600}
"""Long enough that a run carrying on shows the answer came before the deadline (the
defaults: reject, no answer, give up)."""
EVERY_KIND = {"approve_plan": True, "approve_tools": ["calculator"], **TIMED}
"""EVERY_WAIT then waits on the plan, the calculator call and the question in turn."""


class WaitingRun:
    """``aimegraph ARGS`` in a process of its own on the test's store; with ``--json``
    it says what it waits for on stderr, else on stdout (a pipe, as in a log)."""

    def __init__(self, tmp_path: Path, *args: str, json_output: bool = True) -> None:
        command, env = cli_process(tmp_path)
        self.proc = subprocess.Popen(
            [*command, *args, *(["--json"] if json_output else [])],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.said: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._streams: dict[str, list[str]] = {"out": [], "err": []}
        self._readers = [
            threading.Thread(
                target=self._read,
                # With --json it says what it waits for on stderr.
                args=(stream, name, (name == "err") == json_output),
                daemon=True,
            )
            for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str] | None, name: str, told: bool) -> None:
        assert stream is not None
        for line in stream:
            self._streams[name].append(line)
            if told:
                self._lines.put(line.rstrip("\n"))
        if told:
            self._lines.put(None)  # it ended

    def waits(self) -> list[str]:
        """The lines it says from here until it names the commands answering its wait."""
        lines: list[str] = []
        while not (lines and lines[-1].startswith("answer with:")):
            line = self._lines.get(timeout=120)
            assert line is not None, f"it ended without waiting: {self.said + lines}"
            lines.append(line)
        self.said += lines
        return lines

    def outcome(self) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr, once it has ended."""
        self.proc.wait(timeout=300)
        for reader in self._readers:  # read to the end
            reader.join(60)
        return self.proc.returncode, "".join(self._streams["out"]), "".join(self._streams["err"])

    def summary(self) -> tuple[int, dict[str, Any]]:
        code, out, err = self.outcome()
        assert out, err
        return code, json.loads(out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def started() -> Iterator[list[WaitingRun]]:
    """The processes a test starts, killed if it fails before they end."""
    runs: list[WaitingRun] = []
    yield runs
    for run in runs:
        run.stop()


def waiting_run(
    started: list[WaitingRun], tmp_path: Path, thread: str, model: str, config: dict[str, Any]
) -> WaitingRun:
    run = WaitingRun(
        tmp_path,
        *("run", "Multiply six by seven", "--model", model, "--thread", thread),
        *("--workspace", str(tmp_path / "ws"), "--config", json.dumps(config)),
    )
    started.append(run)
    return run


def test_every_kind_of_wait_is_answered_by_resume_from_another_process(
    cli: Cli, tmp_path: Path, started: list[WaitingRun]
) -> None:
    run = waiting_run(started, tmp_path, "w", scenario_spec(tmp_path, EVERY_WAIT), EVERY_KIND)
    said = run.waits()
    assert said[:2] == ["waiting for a human: approve the plan:", "- [ ] t1: Compute, then ask"]
    left = r"in (\d+ h )?(\d+ min )?\d+ s"
    assert re.match(rf"deadline: .* \({left}\); unanswered, it takes the default: reject", said[2])
    assert (
        said[3]
        == "answer with: aimegraph resume w --approve (or --reject REASON, --plan-file JSON)"
    )
    # `show` meanwhile says how to answer; the command it names works.
    code, text = cli("show", "w")
    (hint,) = re.findall(r"resume with: (aimegraph resume w --approve)", text)
    code, text = cli(*shlex.split(hint)[1:])
    assert code == 0 and f"answer sent to the process running thread w (pid {run.proc.pid}" in text

    said = run.waits()
    assert "answered by pid" in said[0]
    assert 'waiting for a human: approve a call to calculator with {"expression": "6*7"}' in said
    # An answer that does not fit is refused at once, as for a run nobody holds.
    code, text = cli("resume", "w", "--answer", "42")
    assert code == 2 and "needs a decision" in text
    assert cli("resume", "w", "--approve")[0] == 0

    said = run.waits()
    assert "waiting for a human: answer: Which region?" in said
    assert "unanswered, it takes the default: no answer" in said[-2]
    assert said[-1] == "answer with: aimegraph resume w --answer TEXT"
    code, text = cli("show", "w")
    (hint,) = re.findall(r"resume with: (aimegraph resume w --answer TEXT)", text)
    code, text = cli(*shlex.split(hint.replace("TEXT", "EU"))[1:])
    assert code == 0 and "answer sent to the process running thread w" in text

    code, summary = run.summary()
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["t1"]["result"]["summary"] == "EU"  # the answer, not the default


def test_an_escalation_is_answered_by_resume_from_another_process(
    cli: Cli, tmp_path: Path, started: list[WaitingRun]
) -> None:
    run = waiting_run(started, tmp_path, "e", scenario_spec(tmp_path, FAILING), ESCALATE | TIMED)
    said = run.waits()
    assert said[0].startswith("waiting for a human: escalation:")
    assert "unanswered, it takes the default: give_up" in said[-2]
    assert said[-1].startswith("answer with: aimegraph resume e --answer TEXT --task a (or ")
    code, text = cli("resume", "e", "--approve")
    assert code == 2 and "--answer TEXT [--task ID]" in text  # refused as ever
    assert cli("resume", "e", "--answer", "1250", "--task", "a")[0] == 0
    code, summary = run.summary()
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["b"]["result"]["summary"] == "b: (answered by a human) 1250"


def test_a_run_waiting_on_a_human_is_cancelled_at_once(
    cli: Cli, tmp_path: Path, started: list[WaitingRun]
) -> None:
    run = waiting_run(started, tmp_path, "c", TWO_TASKS, {"approve_plan": True, **TIMED})
    run.waits()
    code, text = cli("cancel", "c", "--reason", "not needed")
    assert code == 0 and "cancel requested" in text
    code, summary = run.summary()
    assert code == 8 and summary["status"] == "cancelled" and summary["reason"] == "not needed"


def test_a_plan_approval_is_answered_from_the_dashboard(
    tmp_path: Path, started: list[WaitingRun]
) -> None:
    pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")
    from starlette.testclient import TestClient

    from aimegraph.dashboard import create_app
    from aimegraph.dashboard.runs import RunManager

    config = {"approve_plan": True, **TIMED}
    run = WaitingRun(
        tmp_path,
        *("run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", "d"),
        *("--workspace", str(tmp_path / "ws"), "--config", json.dumps(config)),
        json_output=False,  # what it says reaches a pipe as plain lines
    )
    started.append(run)
    said = run.waits()
    assert said[0] == "thread: d" and "waiting for a human: approve the plan:" in said
    with open_checkpointer(f"sqlite:///{tmp_path / 'cp.db'}") as saver:
        client = TestClient(create_app(saver, runs=RunManager(saver)), base_url="http://127.0.0.1")
        wrong = client.post("/api/threads/d/resume", json={"answer": "yes"})
        assert wrong.status_code == 400 and "needs a decision" in wrong.text
        answered = client.post("/api/threads/d/resume", json={"action": "approve"})
        assert answered.status_code == 202, answered.text
        assert answered.json()["handed_to"].startswith(f"pid {run.proc.pid} on ")
    code, out, err = run.outcome()
    assert code == 0 and "answered by pid" in out and "status: succeeded" in out, err


async def test_a_plan_approval_is_answered_over_mcp(
    tmp_path: Path, started: list[WaitingRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp", reason="the [mcp] extra is not installed")
    from mcp.shared.memory import create_connected_server_and_client_session

    from aimegraph.serving.mcp import create_mcp_server
    from aimegraph.serving.runs import ServedRuns

    monkeypatch.chdir(tmp_path)
    run = waiting_run(started, tmp_path, "m", TWO_TASKS, {"approve_plan": True, **TIMED})
    run.waits()
    with open_checkpointer(f"sqlite:///{tmp_path / 'cp.db'}") as saver:
        server = create_mcp_server(ServedRuns(saver, model=TWO_TASKS))
        async with create_connected_server_and_client_session(server) as session:
            await session.initialize()
            status = await session.call_tool("run_status", {"thread_id": "m"})
            assert status.structuredContent is not None
            assert status.structuredContent["status"] == "paused"  # the CLI waits on a human
            (waiting,) = status.structuredContent["interrupts"]
            assert waiting["kind"] == "approve_plan"
            wrong = await session.call_tool(
                "answer", {"thread_id": "m", "decision": {"answer": "yes"}}
            )
            assert wrong.isError and "needs a decision" in str(wrong.content)
            decision = {"thread_id": "m", "decision": {"action": "approve"}}
            answered = await session.call_tool("answer", decision)
            assert not answered.isError, answered.content
            ended = await session.call_tool("wait_for_run", {"thread_id": "m", "timeout_s": 120})
            assert ended.structuredContent is not None
            assert ended.structuredContent["status"] == "succeeded"
    code, summary = run.summary()
    assert code == 0 and summary["status"] == "succeeded"


async def test_waits_of_a_run_the_cli_carries_on_are_answered_over_a2a(
    tmp_path: Path, started: list[WaitingRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started over A2A, paused on its plan; ``aimegraph resume --approve`` carries
    it on in a process of its own, which then waits on the tool call and the question:
    the A2A task's next messages answer them there."""
    pytest.importorskip("a2a", reason="the [a2a] extra is not installed")
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import get_artifact_text, new_text_message
    from a2a.types import Message, Role, SendMessageRequest, TaskState

    from aimegraph.serving.a2a import create_a2a_app, thread_of
    from aimegraph.serving.runs import ServedRuns
    from aimegraph.serving.server import serving_in_background

    def message(text: str, task: Any = None) -> Message:
        sent = new_text_message(text, role=Role.ROLE_USER)
        if task is not None:
            sent.task_id, sent.context_id = task.id, task.context_id
        return sent

    async def send(client: Any, sent: Message) -> list[Any]:
        return [e async for e in client.send_message(SendMessageRequest(message=sent))]

    def last_state(events: list[Any]) -> tuple[int, str]:
        update = [e.status_update for e in events if e.HasField("status_update")][-1]
        parts = update.status.message.parts
        return update.status.state, parts[0].text if parts else ""

    monkeypatch.chdir(tmp_path)
    model = scenario_spec(tmp_path, EVERY_WAIT)
    with open_checkpointer(f"sqlite:///{tmp_path / 'cp.db'}") as saver:
        runs = ServedRuns(saver, model=model, config=EVERY_KIND)
        with serving_in_background(lambda url: create_a2a_app(runs, url)) as url:
            client = await create_client(url, ClientConfig(streaming=True))
            events = await send(client, message("Compute, then ask."))
            task = events[0].task
            assert last_state(events) == (
                TaskState.TASK_STATE_INPUT_REQUIRED,
                "the run waits for a human (approve_plan)",
            )
            thread = thread_of(task.id)
            # --wait: the server's run may still be letting the thread go.
            run = WaitingRun(tmp_path, "resume", thread, "--approve", "--wait")
            started.append(run)
            assert "approve a call to calculator" in " ".join(run.waits())

            events = await send(client, message("approve", task))
            assert last_state(events) == (
                TaskState.TASK_STATE_INPUT_REQUIRED,
                "the run waits for a human (ask_human)",
            )
            events = await send(client, message("EU", task))
            state, _ = last_state(events)
            assert state == TaskState.TASK_STATE_COMPLETED
            (artifact,) = [
                e.artifact_update.artifact for e in events if e.HasField("artifact_update")
            ]
            assert "EU" in get_artifact_text(artifact)
        for thread_id in runs.manager.active():
            runs.manager.wait(thread_id, timeout=60)
    code, summary = run.summary()
    assert code == 0 and summary["status"] == "succeeded"
