"""Shared fixtures. Tests run offline and deterministic with the scripted model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph.state import CompiledStateGraph

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


GraphFactory = Callable[..., tuple[CompiledStateGraph, ScriptedChatModel]]


@pytest.fixture
def scripted_graph(workspace: Path) -> GraphFactory:
    """Build an aime graph over an inline scenario: ``graph, model = scripted_graph(scenario, **config)``."""

    def build(
        scenario: dict[str, Any], *, checkpointer: Any = None, tools: Any = None, **config: Any
    ) -> tuple[CompiledStateGraph, ScriptedChatModel]:
        model = ScriptedChatModel.from_dict(scenario)
        cfg = AimeConfig(workspace=workspace, **config)
        return build_aime_graph(model, config=cfg, checkpointer=checkpointer, tools=tools), model

    return build


def steps_of(graph: CompiledStateGraph, inputs: Any, config: Any = None) -> list[tuple[int, str]]:
    """(super-step, node name) for every task the run executes, in order."""
    return [
        (event["step"], event["payload"]["name"])
        for event in graph.stream(inputs, config, stream_mode="debug")
        if event["type"] == "task"
    ]
