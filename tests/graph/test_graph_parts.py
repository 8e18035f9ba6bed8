"""One set of parts (issue 40 point 2): ``build_aime_graph`` makes the role models,
the registry, the prompt source, knowledge, agent units and workspace once and hands
the same ``GraphParts`` to every sub-builder, team members included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.scripted import plan, spec

import aimegraph.graphs.aime
import aimegraph.graphs.team
from aimegraph import AgentUnit, AimeConfig, build_actor_graph, build_aime_graph
from aimegraph.graphs.parts import GraphParts
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.tools.registry import ToolRegistry

SCENARIO = {"planner": [plan(spec("a"))]}


def spy(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, calls: list[tuple[str, Any, Any]]
) -> None:
    real: Callable[..., Any] = getattr(module, name)

    def recording(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((name, model, kwargs.get("parts")))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(module, name, recording)


@pytest.mark.parametrize("agents", [None, [AgentUnit(name="analyst", description="analyses")]])
def test_every_sub_builder_gets_the_graph_s_parts(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, agents: list[AgentUnit] | None
) -> None:
    calls: list[tuple[str, Any, Any]] = []
    for name in ("build_planner_graph", "build_actor_graph", "build_verifier_graph"):
        spy(monkeypatch, aimegraph.graphs.aime, name, calls)
    spy(monkeypatch, aimegraph.graphs.team, "build_actor_graph", calls)
    model = ScriptedChatModel.from_dict(SCENARIO)
    verifier = ScriptedChatModel.from_dict(SCENARIO)
    config = AimeConfig(workspace=workspace, verify="both")

    build_aime_graph(model, config=config, models={"verifier": verifier}, agents=agents)

    built = {name for name, _, _ in calls}
    assert built == {"build_planner_graph", "build_actor_graph", "build_verifier_graph"}
    (parts,) = {id(p) for _, _, p in calls}
    shared: GraphParts = calls[0][2]
    assert id(shared) == parts and shared.config is config
    assert dict(shared.models) == {
        "planner": model,
        "actor": model,
        "reporter": model,
        "verifier": verifier,
    }
    assert (shared.units is not None) == bool(agents)
    assert shared.workspace == workspace.resolve()
    # Each role's builder got the role's model as resolved in the parts.
    roles = {"build_planner_graph": "planner", "build_verifier_graph": "verifier"}
    for name, given, _ in calls:
        if name in roles:
            assert given is shared.models[roles[name]]


def test_parts_are_given_instead_of_their_fields(workspace: Path) -> None:
    parts = GraphParts.of(config=AimeConfig(workspace=workspace), registry=ToolRegistry())
    model = ScriptedChatModel.from_dict(SCENARIO)
    assert build_actor_graph(model, parts=parts) is not None
    with pytest.raises(TypeError, match="pass config, registry within parts="):
        build_actor_graph(model, parts=parts, config=AimeConfig(), registry=ToolRegistry())


def test_a_builder_alone_makes_its_parts_the_same_way() -> None:
    parts = GraphParts.given(None, config=AimeConfig(workspace=Path("~/ws")))
    assert parts.workspace == (Path.home() / "ws").resolve()
    assert parts.registry.tools == {} and parts.models == {}
