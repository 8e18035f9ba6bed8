"""Agent units backed by an A2A agent: aimegraph's own A2A server (started in the
test, on ``a2a-sdk``) plays a remote agent that asks a human; its ``input-required``
surfaces as the local run's ``ask_human`` wait, answered from Python and from the
CLI, and the sibling unit's work is not repeated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import Cli
from tests.human_scenarios import REPORTED, scenario_spec
from tests.scripted import call, plan, spec, submit
from tests.teams.test_backed_units import noting_graph

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from aimegraph.serving.a2a import create_a2a_app  # noqa: E402
from aimegraph.serving.runs import ServedRuns  # noqa: E402
from aimegraph.serving.server import serving_in_background  # noqa: E402

pytestmark = pytest.mark.slow

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
