"""Models are resolved once, with the config's settings (issue 40 point 2): every
builder, used alone or within ``build_aime_graph``, resolves a spec with
``model_timeout_s`` and ``model_retries`` (the reflection model too), and whether a
model calls tools natively is decided once per model, not on every ReAct step."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import langchain_openai
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

import aimegraph.models.calls
from aimegraph import (
    AgentUnit,
    AimeConfig,
    build_actor_graph,
    build_aime_graph,
    build_planner_graph,
    build_verifier_graph,
)
from aimegraph.graphs.team import build_team_executor
from aimegraph.nodes.online import make_online_node
from aimegraph.optimizer.store import PromptStore

SETTINGS = AimeConfig(model_timeout_s=5, model_retries=4, verify="both")


class RecordedChatOpenAI(ChatOpenAI):
    """ChatOpenAI, each one made recorded."""

    made: ClassVar[list[ChatOpenAI]] = []

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        RecordedChatOpenAI.made.append(self)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[ChatOpenAI]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(langchain_openai, "ChatOpenAI", RecordedChatOpenAI)
    RecordedChatOpenAI.made = []
    return RecordedChatOpenAI.made


def settings_of(models: list[ChatOpenAI]) -> set[tuple[float | None, int | None]]:
    return {(m.request_timeout, m.max_retries) for m in models}  # type: ignore[misc]


BUILDERS: dict[str, Callable[[], Any]] = {
    "planner": lambda: build_planner_graph("openai:p", config=SETTINGS),
    "actor": lambda: build_actor_graph("openai:a", config=SETTINGS, verifier_model="openai:v"),
    "verifier": lambda: build_verifier_graph("openai:v", config=SETTINGS),
    "team": lambda: build_team_executor(
        "openai:t",
        agents=[AgentUnit(name="analyst", description="analyses", model="openai:u")],
        config=SETTINGS,
        verifier_model="openai:v",
    ),
}


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_a_builder_used_alone_honours_the_model_settings(
    made: list[ChatOpenAI], builder: str
) -> None:
    BUILDERS[builder]()
    assert made
    assert settings_of(made) == {(5, 4)}


def test_the_reflection_model_gets_the_model_settings(
    made: list[ChatOpenAI], tmp_path: Path
) -> None:
    make_online_node(SETTINGS, PromptStore(tmp_path / "prompts.jsonl"), "openai:r")
    assert [m.model_name for m in made] == ["r"]
    assert settings_of(made) == {(5, 4)}


def test_the_aime_graph_resolves_each_model_once(made: list[ChatOpenAI], tmp_path: Path) -> None:
    config = SETTINGS.model_copy(update={"optimize_online": True, "workspace": tmp_path})
    build_aime_graph(
        "openai:x",
        config=config,
        models={"verifier": "openai:v", "reflection": "openai:r"},
        prompts=PromptStore(tmp_path / "prompts.jsonl"),
    )
    assert sorted(m.model_name for m in made) == ["r", "v", "x"]
    assert settings_of(made) == {(5, 4)}


def test_native_tool_calling_is_decided_once_per_model(
    scripted_graph: GraphFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: Counter[int] = Counter()
    real = aimegraph.models.calls.supports_tool_calling

    def counted(model: BaseChatModel) -> bool:
        decided[id(model)] += 1
        return real(model)

    monkeypatch.setattr(aimegraph.models.calls, "supports_tool_calling", counted)
    scenario = {
        "planner": [
            plan(spec("a", tool_bundles=["compute"]), spec("b", "a", tool_bundles=["compute"]))
        ],
        "actors": {
            "a": [call("calculator", expression="1+1"), submit("{last_tool_output}")],
            "b": [call("calculator", expression="2+2"), submit("{last_tool_output}")],
        },
    }
    graph, model = scripted_graph(scenario)
    for _ in range(2):  # two runs of one graph: four ReAct steps each
        assert graph.invoke({"goal": "sums"})["status"] == "succeeded"
    assert decided == {id(model): 1}
