"""The run's settings are resolved once per run (issue 40 point 1): the run's
``context`` overrides become one validated ``AimeConfig`` when the run starts, and
every node, subgraph and tool call shares it; ``approve_tools`` is checked once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

import aimegraph.nodes.intake
from aimegraph import AimeConfig
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.policy import ToolRule, check_rules


class CountingValidator:
    """Stands in for a pydantic model's validator, counting the validations."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.validate_python(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def counting(monkeypatch: pytest.MonkeyPatch, model: type[BaseModel]) -> CountingValidator:
    counter = CountingValidator(model.__pydantic_validator__)
    monkeypatch.setattr(model, "__pydantic_validator__", counter)
    return counter


@tool
def send_money(to: str, amount: int) -> str:
    """Send money to someone."""
    return f"sent {amount} to {to}"


# Two tasks, each with a gated call: every node runs, and the tool policy decides twice.
PAY_TWICE = {
    "planner": [plan(spec("a", tool_bundles=["custom"]), spec("b", tool_bundles=["custom"]))],
    "actors": {
        "a": [call("send_money", to="bob", amount=5), submit("{last_tool_output}")],
        "b": [call("send_money", to="eve", amount=7), submit("{last_tool_output}")],
    },
}
RULES = [{"tool": "send_money", "args": {"to": "bob"}, "decision": "allow"}, "send_money"]
CONTEXT = {"max_parallel": 1, "approve_tools": RULES, "verify": "both"}


@pytest.fixture
def counters(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    checks: list[tuple[Any, ...]] = []

    def counted_check(entries: Any, available: Any) -> None:
        checks.append(tuple(entries))
        check_rules(entries, available)

    monkeypatch.setattr(aimegraph.nodes.intake, "check_rules", counted_check)
    yield {
        "configs": counting(monkeypatch, AimeConfig),
        "rules": counting(monkeypatch, ToolRule),
        "checks": checks,
    }


def test_a_run_validates_its_config_and_rules_once(
    scripted_graph: GraphFactory, counters: dict[str, Any]
) -> None:
    graph, model = scripted_graph(
        PAY_TWICE, checkpointer=InMemorySaver(serde=make_serializer()), tools=[send_money]
    )
    config = thread_config("once")
    configs, rules, checks = counters["configs"], counters["rules"], counters["checks"]
    configs.calls = rules.calls = 0
    checks.clear()  # the build checks the built rules (there are none)

    out = graph.invoke({"goal": "pay"}, config, context=CONTEXT)

    (pause,) = out["__interrupt__"]  # eve's payment is asked; bob's was allowed
    assert pause.value["args"] == {"to": "eve", "amount": 7}
    # The context's overrides became one validated config; its rules were checked once.
    assert configs.calls == 1
    assert rules.calls <= 1  # the rule dict, in that one validation
    assert len(checks) == 1

    configs.calls = rules.calls = 0
    out = graph.invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), config, context=CONTEXT
    )
    assert out["status"] == "succeeded"
    assert configs.calls == 1  # context is not checkpointed: a resume resolves it again
    assert rules.calls <= 1 and len(checks) == 1


def test_the_nodes_and_tools_of_a_run_share_its_resolved_config(
    scripted_graph: GraphFactory, workspace: Path
) -> None:
    seen: list[AimeConfig] = []

    @tool
    def note_config(runtime: ToolRuntime[AimeConfig]) -> str:
        """Record the run's config."""
        seen.append(runtime.context)
        return "noted"

    scenario = {
        "planner": [plan(spec("a", tool_bundles=["custom"]))],
        "actors": {"a": [call("note_config"), submit("{last_tool_output}")]},
    }
    graph, _ = scripted_graph(scenario, tools=[note_config], max_steps=40)
    out = graph.invoke({"goal": "g"}, context={"max_parallel": 2})
    assert out["status"] == "succeeded"
    (context,) = seen
    assert isinstance(context, AimeConfig)
    # The builder's fields with the run's override: the whole config, not the override.
    assert (context.max_parallel, context.max_steps, context.workspace) == (2, 40, workspace)
    assert AimeConfig(workspace=workspace, max_steps=40).override(context) is context


def test_a_whole_config_is_its_own_override() -> None:
    base = AimeConfig(max_steps=40)
    whole = base.override({"max_parallel": 2})
    assert base.override(whole) is whole and whole.override(whole) is whole
    assert base.override(base) is base
    # A partial config is merged as before.
    assert base.override(AimeConfig(max_parallel=3)).max_steps == 40
    with pytest.raises(ValueError, match="model_retries apply when the graph is built"):
        AimeConfig(model_retries=5).override(whole)
