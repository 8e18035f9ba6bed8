"""Agent units backed by a ``RemoteGraph`` on ``langgraph dev`` (in-memory LangGraph
Server): the unit's task is one remote run; its usage counts; and after a SIGKILL
while the remote run works, a resume joins that run and never starts it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import cli_process
from tests.human_scenarios import scenario_spec
from tests.integration.test_langgraph_server import (
    DROPPED_ENV,
    OFFLINE_ENV,
    _free_port,
    _langgraph_cli,
    _stop,
    _wait_until_ready,
)
from tests.scripted import plan, spec

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel

pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (the dev extra)")
langgraph_sdk = pytest.importorskip("langgraph_sdk")

pytestmark = pytest.mark.slow

SLOW_S = 6.0

# The remote agent: notes each start in REMOTE_LOG, works SLOW_S seconds, answers.
REMOTE_AGENT = """
import os, time
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph

def work(state: MessagesState) -> dict:
    with open(os.environ["REMOTE_LOG"], "a") as log:
        log.write("start\\n")
    time.sleep(float(os.environ["REMOTE_SLOW_S"]))
    usage = {"input_tokens": 70, "output_tokens": 7, "total_tokens": 77}
    return {"messages": [AIMessage("remote: Q3 is 48213", usage_metadata=usage)]}

builder = StateGraph(MessagesState)
builder.add_node("work", work)
builder.add_edge(START, "work")
graph = builder.compile()
"""

UNITS_MODULE = """
import os
from langgraph.pregel.remote import RemoteGraph
from aimegraph import AgentUnit

UNITS = [AgentUnit(name="remote", description="Counts remotely.",
                   agent=RemoteGraph("slow", url=os.environ["REMOTE_URL"]))]
"""

SCENARIO = {
    "planner": [plan(spec("t1", agent="remote"))],
    "reporter": [{"text": "{all_results}"}],
}


class Remote:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log
        self.client = langgraph_sdk.get_sync_client(url=url, api_key=None, timeout=30.0)

    def starts(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def runs(self) -> list[dict[str, Any]]:
        return [
            run
            for thread in self.client.threads.search(limit=100)
            for run in self.client.runs.list(thread["thread_id"], limit=100)
        ]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    served = tmp_path / "served"
    served.mkdir()
    (served / "remote_agent.py").write_text(REMOTE_AGENT)
    (served / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"slow": "./remote_agent.py:graph"}})
    )
    log = tmp_path / "remote.log"
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env |= OFFLINE_ENV | {"REMOTE_LOG": str(log), "REMOTE_SLOW_S": str(SLOW_S)}
    port = _free_port()
    out = tmp_path / "langgraph-dev.log"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*_langgraph_cli(), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(port), "--config", str(served / "langgraph.json")],
            cwd=served, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(proc, url, out)
        yield Remote(url, log)
    finally:
        _stop(proc)


def test_a_remote_graph_unit_does_its_task_in_one_remote_run(
    remote: Remote, workspace: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.pregel.remote import RemoteGraph

    units = [
        AgentUnit(name="remote", description="Counts.", agent=RemoteGraph("slow", url=remote.url))
    ]
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(SCENARIO),
        agents=units,
        config=AimeConfig(workspace=workspace),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    out = graph.invoke({"goal": "Count Q3"}, thread_config("remote-once"))
    assert out["status"] == "succeeded"
    assert out["tasks"]["t1"].result.summary == "remote: Q3 is 48213"
    used = out["usage"].by_task["t1"]
    assert (used.llm_calls, used.input_tokens, used.output_tokens) == (1, 70, 7)
    (run,) = remote.runs()
    assert remote.starts() == 1 and out["tasks"]["t1"].result.artifacts == {
        "remote_thread": run["thread_id"]
    }


def test_a_sigkill_while_the_remote_unit_works_then_resume_joins_the_same_run(
    remote: Remote, tmp_path: Path
) -> None:
    (tmp_path / "remote_units.py").write_text(UNITS_MODULE)
    base, env = cli_process(tmp_path, REMOTE_URL=remote.url)
    run = subprocess.Popen(
        [*base, "run", "Count Q3", "--model", scenario_spec(tmp_path, SCENARIO),
         "--agents", "remote_units:UNITS", "--thread", "k", "--workspace",
         str(tmp_path / "ws"), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while remote.starts() == 0 and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()
            time.sleep(0.2)
        assert remote.starts() == 1
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    (started,) = remote.runs()
    assert started["status"] in ("pending", "running")

    resumed = subprocess.run(
        [*base, "resume", "k", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["tasks"]["t1"]["result"]["summary"] == "remote: Q3 is 48213"
    # The remote work went on and was joined: one run, started once.
    (joined,) = remote.runs()
    assert joined["run_id"] == started["run_id"] and joined["status"] == "success"
    assert remote.starts() == 1
