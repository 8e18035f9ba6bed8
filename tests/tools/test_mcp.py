"""Issue 25 point 1: MCP servers as tool bundles, through real FastMCP servers: ``notes``
over stdio (a process of its own) and ``weather`` over streamable HTTP on loopback.

A full run calls a tool of each under ``invoke``, ``ainvoke`` and the CLI; each run has
one session per server, opened on its first call and closed when the run ends, is
cancelled or crashes; a server that cannot start is one line naming it; one that dies
mid-run ends its calls as error observations; the specs are stored with the thread, so
``resume`` (in the CLI or on the dashboard) reaches the servers again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters", reason="the [mcp] extra is not installed")

from bench.mcp_servers import notes_command, serve_weather  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from aimegraph import AimeConfig, build_aime_graph  # noqa: E402
from aimegraph.checkpoints import RunSettings  # noqa: E402
from aimegraph.mcp_servers import (  # noqa: E402
    MASKED,
    McpConfigError,
    McpServerError,
    load_mcp_servers,
)
from aimegraph.models.offline.scripted import ScriptedChatModel  # noqa: E402
from aimegraph.tools.mcp import load_mcp_bundles  # noqa: E402
from tests.conftest import SCENARIOS, Cli  # noqa: E402
from tests.scripted import call, plan, submit  # noqa: E402

MCP_TOOLS = f"scripted:{SCENARIOS / 'mcp_tools.yaml'}"
GOAL = "Note tomorrow's weather in Oslo and read the note back."
NOTED = "noted: Oslo: sunny, 21 C"


@pytest.fixture(scope="module")
def weather_url() -> Iterator[str]:
    with serve_weather() as url:
        yield url


@pytest.fixture
def servers(weather_url: str) -> dict[str, Any]:
    return {"mcpServers": {"notes": notes_command(), "weather": {"url": weather_url}}}


@pytest.fixture
def servers_file(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(servers))
    return path


def notes_run(*steps: dict[str, Any], bundles: tuple[str, ...] = ("notes",)) -> dict[str, Any]:
    """One task whose actor takes ``steps``, then submits the last observation."""
    return {
        "planner": [plan({"id": "a", "title": "Use notes", "tool_bundles": list(bundles)})],
        "actors": {"a": [*steps, submit("{last_tool_output}")]},
    }


def observations(model: ScriptedChatModel) -> str:
    """The last actor prompt: every observation of the task."""
    return model.prompts("actor")[-1]


def ended(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (a zombie counts: it runs no more)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            status = Path(f"/proc/{pid}/status").read_text()
        except (ProcessLookupError, FileNotFoundError):
            return True
        if "State:\tZ" in status:
            return True
        time.sleep(0.05)
    return False


def test_a_run_calls_a_stdio_and_an_http_server_under_invoke(
    workspace: Path, servers: dict[str, Any]
) -> None:
    graph = build_aime_graph(MCP_TOOLS, config=AimeConfig(workspace=workspace), mcp_servers=servers)
    out = graph.invoke({"goal": GOAL})
    assert out["status"] == "succeeded", out.get("reason")
    # forecast (HTTP), then write_note and read_note (stdio): the note was kept
    # between the two calls, in the one session (and process) of the run.
    assert out["tasks"]["t1"].result.summary == NOTED
    assert out["final_answer"] == f"Answer: {NOTED}"


async def test_a_run_calls_a_stdio_and_an_http_server_under_ainvoke(
    workspace: Path, servers: dict[str, Any]
) -> None:
    graph = build_aime_graph(MCP_TOOLS, config=AimeConfig(workspace=workspace), mcp_servers=servers)
    out = await graph.ainvoke({"goal": GOAL})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["t1"].result.summary == NOTED


def test_the_cli_runs_with_mcp_and_resume_reaches_the_servers_again(
    cli: Cli, servers_file: Path
) -> None:
    code, paused = cli.json(
        "run", GOAL, "--model", MCP_TOOLS, "--mcp", str(servers_file), "--thread", "m",
        "--workspace", str(cli.workspace), "--approve-plan",
    )  # fmt: skip
    assert code == 5, paused
    # The planner saw both servers as bundles.
    assert paused["interrupts"][0]["plan"]["tasks"][0]["tool_bundles"] == ["weather", "notes"]
    code, done = cli.json("resume", "m", "--approve")  # no --mcp: the stored path is read
    assert code == 0, done
    assert done["final_answer"] == f"Answer: {NOTED}"


def test_the_dashboard_resumes_a_thread_with_its_mcp_servers(cli: Cli, servers_file: Path) -> None:
    pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")
    from aimegraph.checkpoints import open_checkpointer, run_config
    from aimegraph.dashboard.runs import RunManager
    from aimegraph.steering import run_graph

    code, _ = cli.json(
        "run", GOAL, "--model", MCP_TOOLS, "--mcp", str(servers_file), "--thread", "d",
        "--workspace", str(cli.workspace), "--approve-plan",
    )  # fmt: skip
    assert code == 5
    with open_checkpointer(cli.url) as saver:
        runs = RunManager(saver)
        assert runs.resume("d", {"action": "approve"}) is False  # carried on here
        runs.wait("d", timeout=60)
        assert runs.errors == {}
        from aimegraph.checkpoints import latest_settings

        graph = run_graph(latest_settings(saver, "d"), saver)
        values = graph.get_state(run_config("d")).values
    assert values["final_answer"] == f"Answer: {NOTED}"


def test_each_run_has_a_session_of_its_own_closed_when_the_run_ends(
    workspace: Path, servers: dict[str, Any]
) -> None:
    pids = []
    for _ in range(2):
        model = ScriptedChatModel.from_dict(
            notes_run(call("read_note", key="k"), call("write_note", key="k", text="v"),
                      call("server_pid"))
        )  # fmt: skip
        graph = build_aime_graph(model, config=AimeConfig(workspace=workspace), mcp_servers=servers)
        out = graph.invoke({"goal": "g"})
        pid = int(out["tasks"]["a"].result.summary)
        assert "no note under k" in observations(model)  # a fresh session: nothing noted yet
        assert ended(pid)  # the server's process ended with the run
        pids.append(pid)
    assert pids[0] != pids[1]


def test_a_run_starts_a_server_once_for_all_its_actors_and_only_if_it_calls_it(
    workspace: Path, servers: dict[str, Any], tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    servers["mcpServers"]["notes"]["env"] = {"NOTES_STARTS": str(starts)}

    def started() -> int:
        return len(starts.read_text().splitlines()) if starts.exists() else 0

    two_actors = {
        "planner": [
            plan(
                {"id": "a", "title": "Note a", "tool_bundles": ["notes"]},
                {"id": "b", "title": "Note b", "tool_bundles": ["notes"]},
            )
        ],
        "actors": {
            t: [call("write_note", key=t, text=t), call("read_note", key=t), submit("ok")]
            for t in ("a", "b")
        },
    }
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(two_actors),
        config=AimeConfig(workspace=workspace),
        mcp_servers=servers,
    )
    assert started() == 1  # listing its tools when the graph was built
    assert graph.invoke({"goal": "g"})["status"] == "succeeded"
    assert started() == 2  # one session for the run's four calls by two parallel actors
    idle = build_aime_graph(
        ScriptedChatModel.from_dict(notes_run(call("forecast", city="Rome"), bundles=("weather",))),
        config=AimeConfig(workspace=workspace),
        mcp_servers=servers,
    )
    assert started() == 3
    assert idle.invoke({"goal": "g"})["tasks"]["a"].result.summary == "Rome: sunny, 21 C"
    assert started() == 3  # the run never called notes: no session with it


def test_the_session_closes_when_the_run_pauses(workspace: Path, servers: dict[str, Any]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel.from_dict(
        notes_run(
            call("server_pid"), call("ask_human", question="Go on?"), bundles=("notes", "human")
        )
    )
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace), checkpointer=InMemorySaver(),
        mcp_servers=servers,
    )  # fmt: skip
    out = graph.invoke({"goal": "g"}, {"configurable": {"thread_id": "p"}})
    assert out["__interrupt__"][0].value["kind"] == "ask_human"
    assert ended(int(observations(model).split()[-1]))


class Crash(BaseException):
    """What no tool handler catches: the run stops with it, as on a crash."""


@tool
def crash_the_run() -> str:
    """Stops the run with an exception nothing handles."""
    raise Crash("the run crashed")


def test_the_session_closes_when_the_run_crashes(workspace: Path, servers: dict[str, Any]) -> None:
    model = ScriptedChatModel.from_dict(
        notes_run(call("server_pid"), call("crash_the_run"), bundles=("notes", "custom"))
    )
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace), tools=[crash_the_run], mcp_servers=servers
    )
    with pytest.raises(Crash):
        graph.invoke({"goal": "g"})
    pid = int(observations(model).split("server_pid")[-1].split()[-1])
    assert ended(pid)


async def test_the_session_closes_when_the_run_is_cancelled(
    workspace: Path, servers: dict[str, Any], tmp_path: Path
) -> None:
    waiting = tmp_path / "waiting"
    servers["mcpServers"]["notes"]["env"] = {"NOTES_WAITING": str(waiting)}
    model = ScriptedChatModel.from_dict(notes_run(call("wait", seconds=3600)))
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace, tool_timeout_s=3600), mcp_servers=servers
    )
    run = asyncio.create_task(graph.ainvoke({"goal": "g"}))
    for _ in range(600):
        if waiting.exists() and waiting.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(waiting.read_text())
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert ended(pid)


def test_a_server_dying_mid_run_ends_its_calls_as_error_observations(
    workspace: Path, servers: dict[str, Any]
) -> None:
    model = ScriptedChatModel.from_dict(
        notes_run(
            call("refuse", reason="no such notebook"),
            call("crash"),
            call("read_note", key="k"),
        )
    )
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace, tool_timeout_s=20), mcp_servers=servers
    )
    out = graph.invoke({"goal": "g"})
    # The actor carried on with what it got; an answer made of tool errors does not pass.
    assert (
        out["status"] == "rejected" and "tool error: Error: MCP server" in out["verdict"].issues[0]
    )
    seen = observations(model)
    # The tool's own error (an isError result) first, while the server still ran.
    assert "Error executing tool refuse: no such notebook" in seen
    assert "Error: MCP server 'notes' failed on crash: McpError: Connection closed" in seen
    assert (
        "Error: MCP server 'notes' failed on read_note: its connection is closed "
        "(the server stopped, or dropped it)"
    ) in seen


def test_a_server_that_cannot_start_is_one_line_naming_it(
    workspace: Path, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {
        "broken": {
            "command": "python3",
            "args": ["-c", "import sys; sys.exit('config error: NOTES_TOKEN is missing')"],
        }
    }
    with pytest.raises(McpServerError) as failure:
        build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=workspace), mcp_servers=broken
        )
    assert str(failure.value) == (
        "MCP server 'broken' could not start: McpError: Connection closed "
        "(its stderr: config error: NOTES_TOKEN is missing)"
    )
    missing = {"gone": {"command": str(tmp_path / "no-such-server")}}
    with pytest.raises(McpServerError, match=r"^MCP server 'gone' could not start: FileNotF"):
        build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=workspace), mcp_servers=missing
        )
    monkeypatch.setattr("aimegraph.tools.mcp.START_TIMEOUT_S", 1.0)
    silent = {"mute": {"command": "python3", "args": ["-c", "import time; time.sleep(60)"]}}
    with pytest.raises(McpServerError, match=r"^MCP server 'mute' could not start: no answer wit"):
        build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=workspace), mcp_servers=silent
        )
    unreachable = {"far": {"url": "http://127.0.0.1:9/mcp"}}
    with pytest.raises(McpServerError, match=r"^MCP server 'far' could not start: "):
        build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=workspace), mcp_servers=unreachable
        )

    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"mcpServers": broken}))
    code, text = cli("run", "g", "--model", "scripted:demo", "--mcp", str(path))
    assert code == 2
    assert text.strip().splitlines() == [
        "error: MCP server 'broken' could not start: McpError: Connection closed (its "
        "stderr: config error: NOTES_TOKEN is missing)"
    ]


def test_malformed_server_files_are_one_line(tmp_path: Path, cli: Cli) -> None:
    cases = {
        "not json": "is not JSON",
        json.dumps({"mcpServers": {"x": {"args": ["a"]}}}): "give either 'command'",
        json.dumps({"mcpServers": {"bad name!": {"command": "x"}}}): "must be letters",
        json.dumps({"mcpServers": ["x"]}): 'expected {"mcpServers"',
    }
    for content, problem in cases.items():
        path = tmp_path / "servers.json"
        path.write_text(content)
        with pytest.raises(McpConfigError, match=problem):
            load_mcp_servers(path)
        code, text = cli("run", "g", "--model", "scripted:demo", "--mcp", str(path))
        assert code == 2 and problem in text and len(text.strip().splitlines()) == 1
    with pytest.raises(McpConfigError, match="cannot read MCP servers file"):
        load_mcp_servers(tmp_path / "nosuch.json")
    # Other tools' shapes and fields: VS Code's "servers", "type", "disabled".
    path.write_text(
        json.dumps(
            {
                "servers": {
                    "a": {"type": "http", "url": "http://h/mcp", "autoApprove": []},
                    "b": {"command": "x", "disabled": True},
                }
            }
        )
    )
    assert list(load_mcp_servers(path)) == ["a"]
    assert load_mcp_servers(path)["a"].kind == "streamable_http"


def test_secrets_come_from_the_environment_and_are_never_stored(
    workspace: Path, servers: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_NOTES_TOKEN", "s3cret-from-env")
    monkeypatch.setenv("AIMEGRAPH_TEST_PARENT_SECRET", "not for servers")
    servers["mcpServers"]["notes"]["env"] = {
        "NOTES_TOKEN": "${TEST_NOTES_TOKEN}",
        "NOTES_MODE": "${TEST_NOTES_MODE:-careful}",
        "NOTES_PASSWORD": "literal-secret",
    }
    model = ScriptedChatModel.from_dict(
        notes_run(
            call("getenv", variable="AIMEGRAPH_TEST_PARENT_SECRET"),
            call("getenv", variable="NOTES_MODE"),
            call("getenv", variable="NOTES_TOKEN"),
        )
    )
    config = AimeConfig(workspace=workspace, mcp_servers=servers["mcpServers"])
    out = build_aime_graph(model, config=config).invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "s3cret-from-env"
    seen = observations(model)
    assert "AIMEGRAPH_TEST_PARENT_SECRET is not set" in seen  # not the whole environment
    assert "\ncareful\n" in seen  # ${VAR:-default}

    stored = json.dumps(RunSettings(model="scripted:demo", config=config).as_metadata())
    assert "literal-secret" not in stored and "s3cret" not in stored
    assert "${TEST_NOTES_TOKEN}" in stored and MASKED in stored
    assert "literal-secret" not in repr(config)
    # Rebuilt from what was stored, the masked value cannot be used: one line says so.
    rebuilt = RunSettings.from_metadata(json.loads(stored))
    assert rebuilt is not None
    with pytest.raises(McpServerError, match=r"^MCP server 'notes' has env 'NOTES_PASSWORD' st"):
        build_aime_graph(model, config=rebuilt.config)
    monkeypatch.delenv("TEST_NOTES_TOKEN")
    with pytest.raises(McpServerError, match=r"needs \$\{TEST_NOTES_TOKEN\} \(env 'NOTES_TOKEN'\)"):
        build_aime_graph(model, config=config)


def test_a_tool_name_taken_elsewhere_gets_the_servers_prefix(
    servers: dict[str, Any],
) -> None:
    (notes,) = load_mcp_bundles(
        load_mcp_servers({"notes": servers["mcpServers"]["notes"]}), taken=["read_note"]
    )
    assert notes.name == "notes"
    assert notes.description == "A notebook: write notes under a key and read them back."
    names = [t.name for t in notes.tools]
    assert "notes_read_note" in names and "write_note" in names
    # Outside an aimegraph run a call opens a session of its own (the adapter's way).
    prefixed = next(t for t in notes.tools if t.name == "notes_read_note")
    result = asyncio.run(prefixed.ainvoke({"key": "k"}))
    assert result[0]["text"] == "no note under k"


def test_a_servers_timeout_applies_to_its_tools(workspace: Path, servers: dict[str, Any]) -> None:
    servers["mcpServers"]["notes"]["timeout"] = 0.5
    model = ScriptedChatModel.from_dict(notes_run(call("wait", seconds=30)))
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace, tool_timeout_s=60), mcp_servers=servers
    )
    summary = graph.invoke({"goal": "g"})["tasks"]["a"].result.summary
    assert "wait did not finish within 0.5 s (cancelled)" in summary


def test_a_long_mcp_output_is_kept_whole(workspace: Path, servers: dict[str, Any]) -> None:
    model = ScriptedChatModel.from_dict(notes_run(call("long_text", chars=100_000)))
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace), mcp_servers=servers)
    graph.invoke({"goal": "g"})
    (kept,) = (workspace / ".tool_outputs").iterdir()
    assert len(kept.read_text()) == 100_000
    assert "the output has 100000 characters" in observations(model)


def test_references_are_expanded_in_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_HOST", "127.0.0.1")
    monkeypatch.setenv("MCP_KEY", "k3y")
    servers = load_mcp_servers(
        {
            "local": {"command": "${MCP_HOST}-cmd", "args": ["--at", "${MCP_HOST}"],
                      "cwd": "/srv/${MCP_HOST}", "env": {"A": "x${MCP_KEY}y"}},
            "remote": {"url": "http://${MCP_HOST}:80/mcp",
                       "headers": {"Authorization": "Bearer ${MCP_KEY}"}},
        }
    )  # fmt: skip
    local, remote = servers["local"].expanded("local"), servers["remote"].expanded("remote")
    assert (local.command, local.args, local.cwd) == (
        "127.0.0.1-cmd",
        ("--at", "127.0.0.1"),
        "/srv/127.0.0.1",
    )
    assert local.env == {"A": "xk3yy"}
    assert remote.url == "http://127.0.0.1:80/mcp"
    assert remote.headers == {"Authorization": "Bearer k3y"}
    stored = AimeConfig(mcp_servers=servers).model_dump(mode="json")["mcp_servers"]
    assert stored["remote"]["headers"] == {"Authorization": "Bearer ${MCP_KEY}"}


def test_bundle_descriptions_and_the_sse_transport(workspace: Path) -> None:
    with serve_weather("sse") as url:
        servers = load_mcp_servers(
            {
                "weather": {"url": url, "type": "sse"},
                "forecasts": {"url": url, "type": "sse", "description": "Forecasts by city."},
            }
        )
        weather, forecasts = load_mcp_bundles(servers)
        assert (
            weather.description == "Tools of the MCP server weather: Tomorrow's weather for a city."
        )
        assert forecasts.description == "Forecasts by city."
        # Both serve `forecast`: each takes its server's name as a prefix.
        assert [t.name for t in weather.tools] == ["weather_forecast"]
        assert [t.name for t in forecasts.tools] == ["forecasts_forecast"]
        model = ScriptedChatModel.from_dict(
            notes_run(call("weather_forecast", city="Lima"), bundles=("weather",))
        )
        graph = build_aime_graph(model, config=AimeConfig(workspace=workspace), mcp_servers=servers)
        assert graph.invoke({"goal": "g"})["tasks"]["a"].result.summary == "Lima: sunny, 21 C"
