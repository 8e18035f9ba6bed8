"""Shared fixtures. Tests run offline and deterministic with the scripted model."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph.state import CompiledStateGraph

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import redact_url
from aimegraph.models import ScriptedChatModel


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server (``AIMEGRAPH_TEST_POSTGRES_URL`` overrides), after checking it
    answers. Without one the test skips, except under ``CI``, where it must run."""
    url = os.environ.get("AIMEGRAPH_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)

    def unavailable(reason: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"Postgres tests must run in CI: {reason}")
        pytest.skip(reason)

    try:
        import psycopg
        import psycopg_pool  # noqa: F401
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401
    except ImportError as exc:
        unavailable(f"the [postgres] extra is not installed ({exc})")
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        unavailable(f"Postgres is not reachable at {redact_url(url)}: {exc}")
    return url


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
