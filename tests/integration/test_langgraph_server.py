"""The top-level graph served by ``langgraph dev`` (in-memory LangGraph Server).

Starts ``langgraph dev`` from the repo root (its ``langgraph.json``) on a free
loopback port with the offline scripted demo model, then drives it with the
``langgraph-sdk`` client: thread, streamed run, plan-approval interrupt, resume,
final state. Nothing reaches the internet: analytics, the version check, tracing
and the browser are turned off.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (the dev extra)")
langgraph_sdk = pytest.importorskip("langgraph_sdk")

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SALES_CSV = REPO / "src" / "aimegraph" / "demo" / "data" / "sales.csv"
STARTUP_TIMEOUT_S = 60.0
GOAL = (
    "Analyse the sales data in sales.csv: total revenue by region and by product, the "
    "revenue trend from month to month and the fastest-growing region, then write a "
    "Markdown report to report.md."
)

# Keeps `langgraph dev` offline: CLI analytics, the PyPI version check, LangSmith
# tracing, and any license / control-plane key that would start the metadata loop.
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
DROPPED_ENV = (
    "ANTHROPIC_API_URL",  # would win over the provider test's ANTHROPIC_BASE_URL
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _langgraph_cli() -> list[str]:
    exe = Path(sys.executable).with_name("langgraph")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("langgraph")
    if found is None:
        pytest.skip("the langgraph CLI is not installed")
    return [found]


def _wait_until_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"langgraph dev exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            )
        try:
            if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(
        f"langgraph dev not ready after {STARTUP_TIMEOUT_S:.0f}s:\n{log.read_text()[-4000:]}"
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(SALES_CSV, workspace / "sales.csv")
    yield from _serve(tmp_path, AIMEGRAPH_MODEL="scripted:demo", AIMEGRAPH_WORKSPACE=str(workspace))


def _serve(tmp_path: Path, **aimegraph_env: str) -> Iterator[str]:
    """``langgraph dev`` serving the repo's graph, built from ``aimegraph_env``."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(OFFLINE_ENV)
    env.update(aimegraph_env)
    port = _free_port()
    log = tmp_path / "langgraph-dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *_langgraph_cli(),
                "dev",
                "--no-browser",
                "--no-reload",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(proc, url, log)
        yield url
    finally:
        _stop(proc)


def _stream(client: Any, thread_id: str, **kwargs: Any) -> list[Any]:
    parts = list(client.runs.stream(thread_id, "aime", stream_mode=["updates", "values"], **kwargs))
    errors = [part.data for part in parts if part.event == "error"]
    assert not errors, errors
    return parts


def test_served_graph_pauses_for_plan_approval_and_resumes(server_url: str) -> None:
    client = langgraph_sdk.get_sync_client(url=server_url, api_key=None, timeout=30.0)
    assistants = client.assistants.search(graph_id="aime")
    assert [a["graph_id"] for a in assistants] == ["aime"]

    thread = client.threads.create()
    context = {"approve_plan": True}
    parts = _stream(client, thread["thread_id"], input={"goal": GOAL}, context=context)

    interrupts = [
        interrupt
        for part in parts
        if part.event == "updates"
        for interrupt in (part.data or {}).get("__interrupt__", [])
    ]
    assert len(interrupts) == 1, interrupts
    payload = interrupts[0]["value"]
    assert payload["kind"] == "approve_plan"
    assert "- [ ]" in payload["checklist"]

    paused = client.threads.get(thread["thread_id"])
    assert paused["status"] == "interrupted"
    state = client.threads.get_state(thread["thread_id"])
    assert state["interrupts"] and state["interrupts"][0]["value"]["kind"] == "approve_plan"

    # Context is not checkpointed: pass the same overrides again on resume.
    parts = _stream(
        client,
        thread["thread_id"],
        command={"resume": {"action": "approve"}},
        context=context,
    )
    assert not any(
        (part.data or {}).get("__interrupt__") for part in parts if part.event == "updates"
    )

    assert client.threads.get(thread["thread_id"])["status"] == "idle"
    values = client.threads.get_state(thread["thread_id"])["values"]
    assert values["status"] == "succeeded", values.get("status")
    assert values["final_answer"]
    assert values["tasks"]
    assert {task["status"] for task in values["tasks"].values()} == {"completed"}


def test_served_graph_calls_mcp_servers(tmp_path: Path) -> None:
    # Issue 25: AIMEGRAPH_MCP names the servers file; the server runs the graph with
    # astream on its own event loop, the MCP sessions live on the engine's.
    pytest.importorskip("langchain_mcp_adapters", reason="the [mcp] extra is not installed")
    from bench.mcp_servers import notes_command, serve_weather

    scenario = REPO / "tests" / "data" / "scenarios" / "mcp_tools.yaml"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    servers = tmp_path / "servers.json"
    with serve_weather() as weather:
        servers.write_text(
            json.dumps({"mcpServers": {"notes": notes_command(), "weather": {"url": weather}}})
        )
        served = _serve(
            tmp_path,
            AIMEGRAPH_MODEL=f"scripted:{scenario}",
            AIMEGRAPH_WORKSPACE=str(workspace),
            AIMEGRAPH_MCP=str(servers),
        )
        url = next(served)
        try:
            client = langgraph_sdk.get_sync_client(url=url, api_key=None, timeout=60.0)
            thread = client.threads.create()
            goal = "Note tomorrow's weather in Oslo and read the note back."
            _stream(client, thread["thread_id"], input={"goal": goal})
            values = client.threads.get_state(thread["thread_id"])["values"]
        finally:
            served.close()
    assert values["status"] == "succeeded", values.get("reason")
    assert values["final_answer"] == "Answer: noted: Oslo: sunny, 21 C"


def test_served_graph_runs_on_any_provider_spec(tmp_path: Path) -> None:
    # Issue 41: AIMEGRAPH_MODEL takes any provider spec; here Anthropic's real client
    # against a local server speaking its Messages API (see tests.provider_stubs).
    from tests.provider_stubs import AnthropicWire, ProviderStub

    from aimegraph.models import ScriptedChatModel

    scenario = REPO / "tests" / "data" / "scenarios" / "two_tasks.yaml"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with ProviderStub(AnthropicWire(), ScriptedChatModel.from_scenario(str(scenario))) as stub:
        served = _serve(
            tmp_path,
            AIMEGRAPH_MODEL="anthropic:claude-x",
            AIMEGRAPH_WORKSPACE=str(workspace),
            ANTHROPIC_BASE_URL=stub.url,
            ANTHROPIC_API_KEY="test-key",
        )
        url = next(served)
        try:
            client = langgraph_sdk.get_sync_client(url=url, api_key=None, timeout=60.0)
            thread = client.threads.create()
            _stream(client, thread["thread_id"], input={"goal": "Multiply six by seven"})
            values = client.threads.get_state(thread["thread_id"])["values"]
        finally:
            served.close()
    assert values["status"] == "succeeded", values.get("reason")
    assert values["final_answer"] == "Answer: six times seven is the product is 42"
    assert {r["model"] for r in stub.requests} == {"claude-x"}
