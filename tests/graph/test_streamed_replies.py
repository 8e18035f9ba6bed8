"""Under LangGraph's ``stream_mode="messages"`` the models answer through their
streaming path: the scripted demo replays exactly as under ``invoke``, and the fuzz
model injects the same faults, while the replies arrive as token chunks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from tests.graph.test_fuzz_replies import (
    OUTPUT_FILES,
    demo_scenario,
    demo_workspace,
)

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel, load_scenario
from aimegraph.models.offline.fuzz import FuzzChatModel

pytestmark = pytest.mark.usefixtures("fast_retries")


def run(model: Any, workspace: Path, *, streamed: bool, **config: Any) -> tuple[dict, list]:
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace, **config))
    inputs = {"goal": load_scenario("demo").goal}
    if not streamed:
        return graph.invoke(inputs), []
    tokens, values = [], {}
    for namespace, mode, data in graph.stream(
        inputs, stream_mode=["messages", "values"], subgraphs=True
    ):
        if mode == "messages":
            tokens.append(data[0])
        elif not namespace:
            values = data
    return values, tokens


def outcome(out: dict[str, Any], workspace: Path) -> dict[str, Any]:
    return {
        "status": out["status"],
        "answer": out["final_answer"],
        "results": {i: t.result.summary for i, t in out["tasks"].items()},
        "files": {name: (workspace / name).read_text() for name in OUTPUT_FILES},
    }


@pytest.mark.parametrize("mode", ["native", "json"])
def test_the_streamed_demo_replays_as_the_invoked_one(tmp_path: Path, mode: str) -> None:
    runs = {}
    for streamed in (False, True):
        workspace = demo_workspace(tmp_path / f"streamed-{streamed}")
        model = ScriptedChatModel.from_dict(demo_scenario())
        out, tokens = run(model, workspace, streamed=streamed, tool_calling=mode)
        runs[streamed] = (outcome(out, workspace), [role for role, _ in model._calls], tokens)
    (invoked, invoked_roles, _), (streamed_run, streamed_roles, tokens) = runs[False], runs[True]
    assert invoked["status"] == "succeeded"
    assert streamed_run == invoked
    assert streamed_roles == invoked_roles
    # The replies came as chunks, more of them than model calls.
    chunks = [t for t in tokens if isinstance(t, AIMessageChunk)]
    assert len(chunks) > 2 * len(streamed_roles)
    assert any(c.tool_call_chunks for c in chunks) == (mode == "native")


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_the_streamed_fuzzed_demo_keeps_the_faults_of_the_invoked_one(
    tmp_path: Path, seed: int
) -> None:
    runs = {}
    for streamed in (False, True):
        workspace = demo_workspace(tmp_path / f"streamed-{streamed}")
        inner = ScriptedChatModel.from_dict(demo_scenario())
        model = FuzzChatModel(inner=inner, seed=seed)
        out, tokens = run(model, workspace, streamed=streamed)
        runs[streamed] = (outcome(out, workspace), model.applied)
    assert runs[False][0]["status"] == "succeeded"
    assert runs[True] == runs[False]
    assert sum(isinstance(t, AIMessageChunk) for t in tokens) > 2 * len(inner._calls)
    assert runs[True][1].get("transient_error", 0) + runs[True][1].get("empty", 0) > 0
