"""Agent units backed by an A2A agent: aimegraph's own A2A server (started in the
test, on ``a2a-sdk``) plays a remote agent that asks a human; its ``input-required``
surfaces as the local run's ``ask_human`` wait, answered from Python and from the
CLI, and the sibling unit's work is not repeated. A slow ``a2a-sdk`` agent of the
test's own shows that a SIGKILL while it works, then a resume, follows its task on
and never sends the work again."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import Cli, cli_process
from tests.human_scenarios import REPORTED, scenario_spec
from tests.scripted import call, plan, spec, submit
from tests.teams.test_backed_units import noting_graph

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.teams.a2a_unit import INPUT_REQUIRED, exchange

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers import new_task, new_text_part  # noqa: E402
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    ListTasksRequest,
    Message,
    Task,
    TaskState,
)
from a2a.utils.constants import (  # noqa: E402
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_CURRENT,
    TransportProtocol,
)
from starlette.applications import Starlette  # noqa: E402

from aimegraph.serving.a2a import create_a2a_app  # noqa: E402
from aimegraph.serving.runs import ServedRuns  # noqa: E402
from aimegraph.serving.server import serving_in_background  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SLOW_S = 6.0

REMOTE: dict[str, Any] = {
    "planner": [plan(spec("t1", title="Ask", tool_bundles=["human"]))],
    "actors": {
        "t1": [call("ask_human", question="Which mirror?"), submit("mirror: {last_tool_output}")]
    },
    **REPORTED,
}
"""The remote aimegraph: asks which mirror, then reports the answer."""

LOCAL: dict[str, Any] = {
    "planner": [plan(spec("t1", agent="remote"), spec("t2", agent="sibling"))],
    **REPORTED,
}

UNITS_MODULE = """
import os
from aimegraph import AgentUnit
from tests.teams.test_backed_units import noting_graph

SIBLING_RUNS = []
UNITS = [
    AgentUnit(name="remote", description="Fetches remotely.", agent=os.environ["A2A_URL"]),
    AgentUnit(name="sibling", description="Sums.", agent=noting_graph(SIBLING_RUNS, "sum 7")),
]
"""


@pytest.fixture
def a2a_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """aimegraph's A2A server over the asking scenario, in a thread."""
    served = tmp_path / "served"
    served.mkdir()
    monkeypatch.chdir(served)  # the remote runs' workspaces
    with open_checkpointer(f"sqlite:///{served / 'checkpoints.db'}") as saver:
        runs = ServedRuns(saver, model=scenario_spec(served, REMOTE))
        with serving_in_background(lambda url: create_a2a_app(runs, url)) as url:
            yield url
        for thread_id in runs.manager.active():
            runs.manager.wait(thread_id, timeout=60)


def test_input_required_is_answered_from_python(a2a_url: str, workspace: Path) -> None:
    sibling: list[str] = []
    units = [
        AgentUnit(name="remote", description="Fetches remotely.", agent=a2a_url),
        AgentUnit(name="sibling", description="Sums.", agent=noting_graph(sibling, "sum 7")),
    ]
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(LOCAL),
        agents=units,
        config=AimeConfig(workspace=workspace),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    config = thread_config("a2a-asks")
    graph.invoke({"goal": "Fetch the data"}, config)
    (pending,) = graph.get_state(config).interrupts
    assert pending.value["kind"] == "ask_human" and pending.value["unit"] == "remote"
    (asked,) = pending.value["data"][0]["interrupts"]
    assert asked["question"] == "Which mirror?"
    out = graph.invoke(Command(resume="the EU one"), config)
    assert out["status"] == "succeeded"
    assert "mirror: the EU one" in out["tasks"]["t1"].result.summary
    assert out["tasks"]["t1"].result.artifacts["a2a_task"]
    assert out["tasks"]["t2"].result.summary == "sum 7" and len(sibling) == 1
    assert any(u.status == "usage_unknown" and u.task_id == "t1" for u in out["updates"])
    # Neither the A2A agent nor the sibling graph reports usage.
    assert sorted(out["usage"].unknown_tasks) == ["t1", "t2"]


def test_input_required_is_answered_from_the_cli(
    a2a_url: str, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a2a_units.py").write_text(UNITS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("A2A_URL", a2a_url)
    model = scenario_spec(tmp_path, LOCAL, name="local")
    code, summary = cli.run("a2a-cli", "--agents", "a2a_units:UNITS", model=model)
    assert code == 5
    (waiting,) = summary["interrupts"]
    assert waiting["kind"] == "ask_human" and waiting["unit"] == "remote"
    code, summary = cli.json("resume", "a2a-cli", "--answer", "EU")
    assert code == 0 and summary["status"] == "succeeded"
    assert "mirror: EU" in summary["tasks"]["t1"]["result"]["summary"]
    import a2a_units  # type: ignore[import-not-found]

    assert len(a2a_units.SIBLING_RUNS) == 1  # the sibling's work was not repeated


def test_an_answer_is_not_sent_again_once_the_task_went_on(a2a_url: str) -> None:
    """A resume after the answer went out, before the run's checkpoint, has the
    answer to send again: the task has ended, so the unit follows it (a second
    message on an ended task is refused, and the unit would fail)."""
    context = "0b6f1d3e-5c1a-4f7e-9a51-a2a0a2a0a2a0"
    asking = exchange(a2a_url, context, "Fetch the data", None, None)
    assert asking.state == INPUT_REQUIRED and asking.asked
    # An answer to an earlier question is not sent to the one the task asks now.
    earlier = replace(asking, asked="an earlier question")
    assert exchange(a2a_url, context, "Fetch the data", "US", earlier) == asking
    done = exchange(a2a_url, context, "Fetch the data", "EU", asking)
    assert done.state == "TASK_STATE_COMPLETED" and "mirror: EU" in done.text
    again = exchange(a2a_url, context, "Fetch the data", "EU", asking)
    assert (again.task_id, again.state, again.text) == (done.task_id, done.state, done.text)


class SlowAgent(AgentExecutor):
    """An A2A agent that notes each start in ``log``, works ``SLOW_S`` seconds and
    answers."""

    def __init__(self, log: Path) -> None:
        self.log = log

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            first = context.message or Message()
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[first])
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        with self.log.open("a") as log:
            log.write(f"start {context_id}\n")
        await updater.start_work()
        await asyncio.sleep(SLOW_S)
        await updater.add_artifact([new_text_part("remote: Q3 is 48213")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the slow agent is not cancelled in these tests")


class SlowRemote:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def starts(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def tasks(self, context_id: str = "") -> list[Task]:
        async def listed() -> list[Task]:
            client = await create_client(self.url, ClientConfig(streaming=False))
            async with client:
                found = await client.list_tasks(ListTasksRequest(context_id=context_id))
                return list(found.tasks)

        return asyncio.run(listed())


@pytest.fixture
def slow_a2a(tmp_path: Path) -> Iterator[SlowRemote]:
    log = tmp_path / "remote.log"

    def app(url: str) -> Starlette:
        card = AgentCard(
            name="slow",
            description="Counts slowly.",
            version="1",
            supported_interfaces=[
                AgentInterface(
                    url=url,
                    protocol_binding=TransportProtocol.JSONRPC,
                    protocol_version=PROTOCOL_VERSION_CURRENT,
                )
            ],
            skills=[AgentSkill(id="count", name="Count", description="Counts.", tags=["count"])],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
        )
        handler = DefaultRequestHandler(
            agent_executor=SlowAgent(log), task_store=InMemoryTaskStore(), agent_card=card
        )
        routes = [
            *create_agent_card_routes(card, card_url=AGENT_CARD_WELL_KNOWN_PATH),
            *create_jsonrpc_routes(handler, rpc_url="/"),
        ]
        return Starlette(routes=routes)

    with serving_in_background(app) as url:
        yield SlowRemote(url, log)


SLOW_UNITS_MODULE = """
import os
from aimegraph import AgentUnit

UNITS = [AgentUnit(name="remote", description="Counts remotely.", agent=os.environ["A2A_URL"])]
"""


def test_a_sigkill_while_the_a2a_unit_works_then_resume_follows_the_same_task(
    slow_a2a: SlowRemote, tmp_path: Path
) -> None:
    (tmp_path / "slow_a2a_units.py").write_text(SLOW_UNITS_MODULE)
    base, env = cli_process(tmp_path, A2A_URL=slow_a2a.url)
    scenario = {"planner": [plan(spec("t1", agent="remote"))], **REPORTED}
    run = subprocess.Popen(
        [*base, "run", "Count Q3", "--model", scenario_spec(tmp_path, scenario),
         "--agents", "slow_a2a_units:UNITS", "--thread", "k", "--workspace",
         str(tmp_path / "ws"), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not slow_a2a.starts() and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()
            time.sleep(0.2)
        assert len(slow_a2a.starts()) == 1
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    (started,) = slow_a2a.tasks()
    assert started.status.state == TaskState.TASK_STATE_WORKING

    resumed = subprocess.run(
        [*base, "resume", "k", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "succeeded"
    t1 = summary["tasks"]["t1"]["result"]
    assert t1["summary"] == "remote: Q3 is 48213" and t1["artifacts"] == {"a2a_task": started.id}
    # The remote work went on and was followed: one task in the unit's context,
    # started once.
    (followed,) = slow_a2a.tasks(started.context_id)
    assert followed.id == started.id and followed.status.state == TaskState.TASK_STATE_COMPLETED
    assert slow_a2a.starts() == [f"start {started.context_id}"]
