"""aimegraph served to other agents (issue 36): the A2A server driven by the official
``a2a-sdk`` client, the MCP server by the ``mcp`` client over stdio and streamable
HTTP. Each round trip: start a goal, follow it, answer the human it waits for,
cancel another run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import Cli
from tests.human_scenarios import ASKING, REPORTED, scenario_spec
from tests.scripted import call, plan, spec, submit

from aimegraph.checkpoints import open_checkpointer

a2a = pytest.importorskip("a2a", reason="the [a2a] extra is not installed")
pytest.importorskip("mcp", reason="the [mcp] extra is not installed")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers import get_artifact_text, get_data_parts, new_text_message  # noqa: E402
from a2a.types import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from aimegraph.serving.a2a import create_a2a_app, thread_of  # noqa: E402
from aimegraph.serving.mcp import create_mcp_server, mcp_http_app  # noqa: E402
from aimegraph.serving.runs import ServedRuns  # noqa: E402
from aimegraph.serving.server import serving_in_background  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedRuns]:
    """Runs of the asking scenario over an SQLite store; workspaces in tmp_path."""
    monkeypatch.chdir(tmp_path)
    with open_checkpointer(f"sqlite:///{tmp_path / 'checkpoints.db'}") as saver:
        served = ServedRuns(saver, model=scenario_spec(tmp_path, ASKING))
        yield served
        for thread_id in served.manager.active():  # nothing may write after the store closes
            served.manager.wait(thread_id, timeout=60)


SLOW: dict[str, Any] = {
    "planner": [plan(spec("t1", title="Wait", tool_bundles=["compute"]))],
    "actors": {"t1": [call("python", code="import time; time.sleep(1.5)"), submit("waited")]},
    **REPORTED,
}
"""One actor busy for 1.5 s: a run live long enough to be cancelled while it runs."""


def _a2a(runs: ServedRuns) -> AbstractContextManager[str]:
    return serving_in_background(lambda url: create_a2a_app(runs, url))


def _message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    message = new_text_message(text, role=Role.ROLE_USER)
    if task_id:
        message.task_id = task_id
        message.context_id = context_id or ""
    return message


async def _send(client: Any, message: Message) -> list[StreamResponse]:
    return [event async for event in client.send_message(SendMessageRequest(message=message))]


def _states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


async def test_a2a_round_trip_send_stream_input_required_resume_cancel(runs: ServedRuns) -> None:
    with _a2a(runs) as url:
        client = await create_client(url, ClientConfig(streaming=True))
        events = await _send(client, _message("Pick a mirror and fetch from it."))
        task = events[0].task
        states = _states(events)
        # Streamed: submitted, working with the progress list, then paused for the human.
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert TaskState.TASK_STATE_WORKING in states
        working = [
            e.status_update.status.message.parts[0].text
            for e in events
            if e.HasField("status_update")
            and e.status_update.status.state == TaskState.TASK_STATE_WORKING
            and e.status_update.status.message.parts
        ]
        assert working[:2] == ["- [ ] t1: Ask", "- [~] t1: Ask"]
        assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        asked = events[-1].status_update.status.message
        (data,) = get_data_parts(asked.parts)
        (interrupt,) = data["interrupts"]
        assert interrupt["kind"] == "ask_human" and interrupt["question"] == "Which mirror?"
        assert data["thread_id"] == thread_of(task.id)

        # Resume: the next message on the task answers; the run carries on and completes.
        events = await _send(client, _message("the EU one", task.id, task.context_id))
        assert _states(events)[-1] == TaskState.TASK_STATE_COMPLETED
        (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
        assert artifact.name == "answer" and "ok" in get_artifact_text(artifact)
        assert runs.view(thread_of(task.id)).status == "succeeded"

        # A non-streaming client sees the same task, paused; cancelling it cancels the run.
        blocking = await create_client(url, ClientConfig(streaming=False))
        (response,) = await _send(blocking, _message("Pick a mirror again."))
        paused = response.task
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        cancelled = await blocking.cancel_task(CancelTaskRequest(id=paused.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert runs.view(thread_of(paused.id)).status == "cancelled"
        again = await blocking.get_task(GetTaskRequest(id=paused.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED


async def test_a2a_cancel_stops_a_live_run_at_its_next_step(
    runs: ServedRuns, tmp_path: Path
) -> None:
    # The operator's choice, in the server's config: code runs unconfined in this test.
    runs.model, runs.config = scenario_spec(tmp_path, SLOW, "slow"), {"sandbox": "none"}
    with _a2a(runs) as url:
        client = await create_client(url, ClientConfig(streaming=True))
        events = client.send_message(SendMessageRequest(message=_message("Wait a while.")))
        task = (await anext(events)).task
        async for event in events:
            message = event.status_update.status.message
            if message.parts and message.parts[0].text == "- [~] t1: Wait":
                break  # the actor is in its tool call
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        await events.aclose()
        view = runs.view(thread_of(task.id))
        # Cancelled while live (not after it ended), its running step finished first.
        assert view.status == "cancelled" and view.reason == "cancelled"


async def test_a2a_answer_that_does_not_fit_asks_again(runs: ServedRuns) -> None:
    with _a2a(runs) as url:
        client = await create_client(url, ClientConfig(streaming=True))
        # The caller asks for plan approval in the first message's metadata.
        first = _message("Pick a mirror.")
        first.metadata.update({"config": {"approve_plan": True}})
        events = await _send(client, first)
        task = events[0].task
        (data,) = get_data_parts(events[-1].status_update.status.message.parts)
        assert data["interrupts"][0]["kind"] == "approve_plan"
        events = await _send(client, _message("maybe", task.id, task.context_id))
        assert _states(events) == [TaskState.TASK_STATE_INPUT_REQUIRED]
        (data,) = get_data_parts(events[-1].status_update.status.message.parts)
        assert "approve or reject" in data["error"]
        events = await _send(client, _message("reject too vague", task.id, task.context_id))
        assert _states(events)[-1] == TaskState.TASK_STATE_REJECTED
        assert "too vague" in events[-1].status_update.status.message.parts[0].text


async def test_a2a_unknown_config_field_is_named_with_the_closest(runs: ServedRuns) -> None:
    with _a2a(runs) as url:
        client = await create_client(url, ClientConfig(streaming=True))
        first = _message("Pick a mirror.")
        first.metadata.update({"config": {"max_replan": 1}})
        events = await _send(client, first)
        assert _states(events)[-1] == TaskState.TASK_STATE_FAILED
        assert UNKNOWN_FIELD in events[-1].status_update.status.message.parts[0].text


UNKNOWN_FIELD = "unknown setting 'max_replan' (did you mean 'max_replans'?)"


async def test_a2a_needs_the_token_when_it_has_one(runs: ServedRuns) -> None:
    with serving_in_background(lambda url: create_a2a_app(runs, url, token="s3cret")) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            card = (await http.get(AGENT_CARD_WELL_KNOWN_PATH)).json()
            assert "bearer" in card["securitySchemes"]  # the card is public, and says so
            call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
            await _refused_without_or_with_a_wrong_token(http, "/", call)
            authorised = {"Authorization": "Bearer s3cret"}
            assert (await http.post("/", json=call, headers=authorised)).status_code == 200


async def _refused_without_or_with_a_wrong_token(
    http: httpx.AsyncClient, path: str, body: Any
) -> None:
    """No token is told one is required; a wrong one, that it is wrong (RFC 6750's
    ``invalid_token``)."""
    none = await http.post(path, json=body)
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    assert "a bearer token is required" in none.json()["error"]
    for header in ("Bearer s3cre", "Bearer s3cret-not", "bearer S3CRET"):
        wrong = await http.post(path, json=body, headers={"Authorization": header})
        assert wrong.status_code == 401, header
        assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert "the bearer token is wrong" in wrong.json()["error"]


async def _mcp_round_trip(session: ClientSession) -> None:
    """Start, follow with progress, answer, finish; start again, cancel; a mistake."""
    await session.initialize()
    names = {tool.name for tool in (await session.list_tools()).tools}
    assert {"start_run", "run_status", "wait_for_run", "answer", "cancel_run"} <= names
    # A caller sets budgets and human control, never the host's settings.
    refused = await session.call_tool("start_run", {"goal": "x", "config": {"workspace": "/"}})
    assert refused.isError and "may not set workspace" in refused.content[0].text
    # A field no config has is unknown, not refused: the closest one is named, as the CLI does.
    unknown = await session.call_tool("start_run", {"goal": "x", "config": {"max_replan": 1}})
    assert unknown.isError and refused.content[0].text != unknown.content[0].text
    assert UNKNOWN_FIELD in unknown.content[0].text
    thread_id = (await _tool(session, "start_run", goal="Pick a mirror."))["thread_id"]
    progress: list[tuple[float, float | None, str | None]] = []

    async def heard(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    run = await _tool(session, "wait_for_run", heard, thread_id=thread_id, timeout_s=60)
    # Where the run was when asked (planned, or already at the question), then each step.
    assert run["status"] == "paused" and progress[-1] == (0, 1, "- [~] t1: Ask")
    assert {message for *_, message in progress} <= {"- [ ] t1: Ask", "- [~] t1: Ask"}
    (waiting,) = run["interrupts"]
    assert waiting["kind"] == "ask_human" and waiting["question"] == "Which mirror?"
    assert (await _tool(session, "run_status", thread_id=thread_id))["status"] == "paused"
    # An answer that does not fit is a tool error saying what would.
    decision = {"action": "approve"}
    refused = await session.call_tool("answer", {"thread_id": thread_id, "decision": decision})
    assert refused.isError and "asks a question" in refused.content[0].text
    await _tool(session, "answer", thread_id=thread_id, decision={"answer": "the EU one"})
    run = await _tool(session, "wait_for_run", thread_id=thread_id, timeout_s=60)
    assert run["status"] == "succeeded" and "ok" in run["final_answer"]

    other = (await _tool(session, "start_run", goal="Pick another."))["thread_id"]
    assert (await _tool(session, "wait_for_run", thread_id=other))["status"] == "paused"
    assert (await _tool(session, "cancel_run", thread_id=other))["status"] == "cancelled"
    unknown = await session.call_tool("run_status", {"thread_id": "nope"})
    assert unknown.isError and "no thread 'nope'" in unknown.content[0].text


async def _tool(session: ClientSession, name: str, heard: Any = None, **arguments: Any) -> Any:
    result = await session.call_tool(name, arguments, progress_callback=heard)
    assert not result.isError, result.content
    return result.structuredContent


async def test_mcp_round_trip_over_stdio(tmp_path: Path) -> None:
    model = scenario_spec(tmp_path, ASKING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "aimegraph.cli",
            "--checkpoints",
            f"sqlite:///{tmp_path / 'c.db'}",
            "mcp",
            "serve",
            "--transport",
            "stdio",
            "--model",
            model,
        ],  # fmt: skip
        env=env,
        cwd=tmp_path,
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await _mcp_round_trip(session)


async def test_mcp_round_trip_over_streamable_http(runs: ServedRuns) -> None:
    server = create_mcp_server(runs)
    with serving_in_background(lambda url: mcp_http_app(server, token="s3cret")) as url:
        async with httpx.AsyncClient() as anonymous:
            await _refused_without_or_with_a_wrong_token(anonymous, f"{url}/mcp", {})
        http = httpx.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=60)
        async with (
            http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await _mcp_round_trip(session)


def test_serving_beyond_this_machine_needs_a_token(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIMEGRAPH_SERVE_TOKEN", raising=False)
    for command in (("a2a", "serve"), ("mcp", "serve", "--transport", "http")):
        code, text = cli(*command, "--host", "0.0.0.0")
        assert code == 2 and "pass --token" in text and "Traceback" not in text
    code, text = cli("a2a", "serve", "--config", '{"max_replans": "many"}')
    assert code == 2 and "max_replans" in text
