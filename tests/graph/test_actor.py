"""Issue 3: the actor factory, tool failures as observations, JSON tool-calling mode."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.runtime import Runtime
from tests.conftest import GraphFactory
from tests.scripted import call, plan, submit

from aimegraph import (
    ActorSpec,
    AimeConfig,
    DefaultActorFactory,
    Task,
    TaskResult,
    ToolRegistry,
    build_actor_graph,
    default_registry,
)
from aimegraph.knowledge import KnowledgeBase
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.nodes import make_conclude_node
from aimegraph.nodes.actor_factory import task_message
from aimegraph.tools import ToolRegistryError


@tool
def explode(reason: str) -> str:
    """Always fails (a tool with a bug)."""
    raise RuntimeError(f"internal failure: {reason}")


SLOW_RELEASE = threading.Event()
SLOW_FINISHED = threading.Event()


@tool
def slow(seconds: float) -> str:
    """Waits until the test releases it (at most ``seconds``), then answers."""
    SLOW_RELEASE.wait(seconds)
    SLOW_FINISHED.set()
    return "finally"


@tool
def chatty() -> str:
    """Returns far too much text."""
    return "x" * 50_000


@tool
def picky(value: int) -> str:
    """Refuses odd numbers with a message for the model."""
    if value % 2:
        raise ToolException(f"{value} is odd; pass an even number")
    return f"{value} accepted"


CUSTOM = [explode, slow, chatty, picky]


def last_actor_prompt(model: Any, task_id: str) -> str:
    return [p for p in model.prompts("actor") if f'<task id="{task_id}"' in p][-1]


def test_actor_recovers_from_unknown_tool_bad_arguments_and_exceptions(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                plan({"id": "a", "title": "Compute", "tool_bundles": ["compute", "custom"]})
            ],
            "actors": {
                "a": [
                    call("web_search", query="anything"),
                    call("calculator"),
                    call("calculator", expression="1/0"),
                    call("explode", reason="disk on fire"),
                    call("picky", value=3),
                    call("calculator", expression="2+2"),
                    submit("result {last_tool_output}"),
                ]
            },
        },
        tools=CUSTOM,
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "result 4"
    prompt = last_actor_prompt(model, "a")
    assert "tool 'web_search' is not available; choose from: calculator, python" in prompt
    assert "invalid arguments for calculator" in prompt and '"expression"' in prompt
    assert "division by zero" in prompt
    assert "the tool raised RuntimeError: internal failure: disk on fire" in prompt
    assert "Error: 3 is odd; pass an even number" in prompt
    assert "Traceback" not in prompt  # tracebacks go to the logs, not to the model


def test_slow_tools_time_out_and_long_outputs_are_kept_whole(
    scripted_graph: GraphFactory, workspace: Path
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan({"id": "a", "title": "Try", "tool_bundles": ["custom"]})],
            "actors": {"a": [call("slow", seconds=60), call("chatty"), submit("done")]},
        },
        tools=CUSTOM,
        tool_timeout_s=0.3,
        max_observation_chars=1000,
    )
    SLOW_RELEASE.clear()
    SLOW_FINISHED.clear()
    try:
        out = graph.invoke({"goal": "g"})
        # The run ended while the tool still waited: the guard did not wait for it.
        assert not SLOW_FINISHED.is_set()
    finally:
        SLOW_RELEASE.set()
    assert out["tasks"]["a"].status == "completed"
    prompt = last_actor_prompt(model, "a")
    assert "slow did not finish within 0.3 s" in prompt
    # Past max_observation_chars the output is kept in the workspace, shown in part.
    (kept,) = (workspace / ".tool_outputs").iterdir()
    assert kept.read_text() == "x" * 50_000
    assert "the output has 50000 characters" in prompt
    assert f"saved as '.tool_outputs/{kept.name}'" in prompt
    assert "x" * 1001 not in prompt


def test_repeating_the_same_call_is_refused(scripted_graph: GraphFactory) -> None:
    same = call("calculator", expression="1+1")
    graph, model = scripted_graph(
        {
            "planner": [plan({"id": "a", "title": "Loop", "tool_bundles": ["compute"]})],
            "actors": {"a": [same, same, same, submit("{last_tool_output}")]},
        }
    )
    out = graph.invoke({"goal": "g"})
    assert "already called calculator with these exact arguments 2 times" in (
        out["tasks"]["a"].result.summary
    )


def test_json_mode_parses_fenced_and_malformed_replies(scripted_graph: GraphFactory) -> None:
    fenced_plan = (
        "Here is the plan:\n```json\n{'rationale': 'one task', 'tasks': "
        "[{'id': 'a', 'title': 'Multiply', 'tool_bundles': ['compute']}],}\n```"
    )
    graph, model = scripted_graph(
        {
            "planner": [{"raw": fenced_plan}],
            "actors": {
                "a": [
                    {"raw": "```json\n{'tool': 'calculator', 'args': {'expression': '6*7'},}\n```"},
                    {"raw": "Let me think about what to do next."},
                    {
                        "raw": 'Done! {"tool": "submit_result", "args": {"status": "completed", '
                        '"summary": "{last_tool_output}"}} Hope that helps.'
                    },
                ]
            },
            "verifier": [{"raw": '{"passed": true, "reasoning": "fine", "issues": []} trailing'}],
            "reporter": [{"text": "The product is {result:a}."}],
        },
        tool_calling="json",
    )
    out = graph.invoke({"goal": "multiply"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["final_answer"].startswith("The product is 42")
    prompts = model.prompts("actor")
    assert "## How to call tools" in prompts[0]
    assert "could not be used: no JSON" in prompts[2]  # the prose reply was sent back
    assert "Observation from calculator:\n42" in prompts[2]
    assert "## Reply format" in model.prompts("planner")[0]


def test_json_mode_gives_up_after_bounded_reasks(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan({"id": "a", "title": "A"})],
            "actors": {"a": [{"raw": "no json"}] * 10},
        },
        tool_calling="json",
        max_actor_steps=3,
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].status == "failed"
    assert "Stopped after 3" in out["tasks"]["a"].result.summary


# --- the factory ---


def registry_for(workspace: Path) -> ToolRegistry:
    kb = KnowledgeBase()
    kb.add_texts(
        [
            "Refunds are paid within 14 days of the return being received.",
            "The office is closed on public holidays.",
        ],
        metadatas=[{"source": "policy.md"}, {"source": "office.md"}],
    )
    return default_registry(workspace, knowledge=kb, extra_tools=[picky])


def test_task_bundles_decide_the_tools(workspace: Path) -> None:
    registry = registry_for(workspace)
    factory = DefaultActorFactory(registry, workspace=workspace)
    spec = factory.build(Task(id="a", title="Anything", tool_bundles=("files",)), "goal", {})
    assert spec.bundles == ("files",)
    assert spec.tool_names == ["read_file", "write_file", "append_file", "list_dir"]
    tools = spec.system_prompt().split("## Tools\n")[1].split("\n")[0]
    assert tools == "read_file, write_file, append_file, list_dir, update_progress, submit_result"


def test_the_prompt_names_each_tool_and_leaves_its_definition_to_the_bound_schema(
    workspace: Path,
) -> None:
    """The bound tool definitions (native, or JSON mode's list) carry every description
    in full: the system prompt only names the tools, so no call pays for a text twice."""
    registry = registry_for(workspace)
    factory = DefaultActorFactory(registry, workspace=workspace)
    spec = factory.build(Task(id="a", title="Sum", tool_bundles=("compute",)), "goal", {})
    prompt = spec.system_prompt()
    for tool_ in spec.tools:
        assert tool_.name in prompt
        assert tool_.description.split(". ")[0] not in prompt


@pytest.mark.parametrize(
    ("title", "bundle"),
    [
        ("Compute the average and the percentage change of the figures", "compute"),
        ("Write the summary into a text file in the workspace", "files"),
        ("Search the knowledge base for background facts about refunds", "knowledge"),
        ("Ask the human user which region matters most", "human"),
    ],
)
def test_bundles_are_matched_semantically_when_the_task_names_none(
    workspace: Path, title: str, bundle: str
) -> None:
    factory = DefaultActorFactory(registry_for(workspace), workspace=workspace, max_bundles=1)
    assert factory.build(Task(id="a", title=title), "goal", {}).bundles == (bundle,)


def test_spec_has_all_five_parts(workspace: Path) -> None:
    (workspace / "data.csv").write_text("a,b\n1,2\n")
    registry = registry_for(workspace)
    kb = KnowledgeBase()
    kb.add_texts(["Refunds are paid within 14 days."], metadatas=[{"source": "policy.md"}])
    factory = DefaultActorFactory(
        registry,
        workspace=workspace,
        knowledge=kb,
        personas={"auditor": "You are a meticulous financial auditor."},
    )
    task = Task(
        id="a",
        title="Check the refund policy",
        persona="auditor",
        completion_criteria="the number of days is stated",
        tool_bundles=("knowledge",),
    )
    spec = factory.build(task, "goal", {})
    assert isinstance(spec, ActorSpec)
    assert spec.persona == "You are a meticulous financial auditor."
    assert spec.knowledge == ("[policy.md] Refunds are paid within 14 days.",)
    assert "data.csv" in spec.environment
    prompt = spec.system_prompt()
    for part in (spec.persona, spec.knowledge[0], "data.csv", "knowledge_search"):
        assert part in prompt
    # The criteria are the task's, in its message: the system prompt stays the same
    # across tasks up to the tools (provider prompt caches).
    assert spec.output_format == factory.output_format(Task(id="c", title="other"))
    state: Any = {"goal": "goal", "task": task}
    assert "Done when: the number of days is stated" in task_message(state).text
    other = factory.build(Task(id="b", title="x", persona="a statistician"), "goal", {})
    assert other.persona.startswith("You are a statistician.")


def test_a_custom_factory_is_used(scripted_graph: GraphFactory, workspace: Path) -> None:
    built: list[str] = []

    class OneToolFactory(DefaultActorFactory):
        def build(self, task: Task, goal: str, dependencies: Any) -> ActorSpec:
            built.append(task.id)
            spec = super().build(task, goal, dependencies)
            return ActorSpec(**{**spec.__dict__, "persona": "You are a pirate accountant."})

    from aimegraph import AimeConfig, build_aime_graph
    from aimegraph.models import ScriptedChatModel

    model = ScriptedChatModel.from_dict({"planner": [plan({"id": "a", "title": "A"})]})
    registry = default_registry(workspace)
    graph = build_aime_graph(
        model,
        tools=registry,
        config=AimeConfig(workspace=workspace),
        factory=OneToolFactory(registry, workspace=workspace),
    )
    assert graph.invoke({"goal": "g"})["status"] == "succeeded"
    assert built == ["a"] and "pirate accountant" in model.prompts("actor")[0]


def test_registry_errors() -> None:
    registry = ToolRegistry()
    registry.add_bundle("math", "Arithmetic.", [picky])
    with pytest.raises(ToolRegistryError, match="already registered"):
        registry.add(picky, bundle="math")
    with pytest.raises(ToolRegistryError, match="already registered"):
        registry.add_bundle("math", "again")
    with pytest.raises(ToolRegistryError, match="unknown bundle 'nope'"):
        registry.add(explode, bundle="nope")
    with pytest.raises(ToolRegistryError, match="unknown tool bundle 'web'"):
        registry.select(["web"])

    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    added = registry.add(double, bundle="math")
    assert isinstance(added, BaseTool) and added.invoke({"x": 4}) == 8
    assert [t.name for t in registry.select(["math"])] == ["picky", "double"]


def test_plain_tool_lists_join_a_custom_bundle(workspace: Path) -> None:
    registry = default_registry(workspace, extra_tools=[picky])
    assert set(registry.bundles) == {"files", "compute", "human", "memory", "custom"}
    assert registry.bundles["custom"].tools == ("picky",)
    assert "picky" in registry.describe()


def actor_steps(workspace: Path, script: list[dict[str, Any]], **config: Any) -> list[str]:
    """The nodes one actor runs, in order, and the task it settles."""
    model = ScriptedChatModel.from_dict({"actors": {"a": script}})
    graph = build_actor_graph(
        model,
        registry=default_registry(workspace),
        config=AimeConfig(workspace=workspace, **config),
    )
    task = Task(id="a", title="Task a", status="in_progress", attempts=1, tool_bundles=("files",))
    nodes, settled = [], None
    for update in graph.stream(
        {"goal": "g", "task": task, "dependency_results": {}}, stream_mode="updates"
    ):
        ((node, values),) = update.items()
        nodes.append(node)
        # A tools step reports one update per tool call.
        for written in values if isinstance(values, list) else [values or {}]:
            settled = written.get("tasks", {}).get("a", settled)
    assert settled is not None, f"nothing settled task a: {nodes}"
    return [*nodes, f"{settled.status}: {settled.result.summary[:40]}"]


def test_a_task_settles_in_the_step_where_its_loop_ends(workspace: Path) -> None:
    # The factory opens the first react step, and a reply that only reports (progress,
    # the result) is run in that step: no step for either, nor one to conclude.
    assert actor_steps(workspace, [submit("done")]) == ["react", "completed: done"]
    assert actor_steps(workspace, [{"text": "The answer is 4."}]) == [
        "react",
        "completed: The answer is 4.",
    ]
    progress = call("update_progress", status="s", message="m")
    assert actor_steps(workspace, [progress, submit("ok")]) == ["react", "react", "completed: ok"]
    # Any other tool runs in the tools step, each call a task of its own; a result
    # submitted beside it waits for it: the next react runs it and ends the loop
    # without a model call, the output of the work in the result.
    (workspace / "data.csv").write_text("a,b\n")
    both = {"calls": [call("list_dir"), call("submit_result", status="completed", summary="ls")]}
    assert actor_steps(workspace, [both]) == [
        "react",
        "tools",
        "react",
        "completed: ls\n\ndata.csv  (4 bytes)",
    ]
    # The step cap is reached in a tools step: the next react settles without a call.
    capped = actor_steps(workspace, [call("list_dir")], max_actor_steps=1)
    assert capped == ["react", "tools", "react", "failed: Stopped after 1 steps (max_actor_steps=1"]


def test_reports_run_in_the_react_step_are_checked_as_the_tools_step_checks_them(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan({"id": "a", "title": "A"})],
            "actors": {
                "a": [
                    call("submit_result", status="done", summary="bad status"),
                    call("update_progress", status="s", message="same"),
                    call("update_progress", status="s", message="same"),
                    call("update_progress", status="s", message="same"),
                    submit("fixed"),
                ]
            },
        }
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="fixed")
    prompt = last_actor_prompt(model, "a")
    assert "invalid arguments for submit_result" in prompt and '"status"' in prompt
    assert "Input should be 'completed' or 'failed'" in prompt
    assert "You already called update_progress with these exact arguments 2 times" in prompt
    assert [u.message for u in out["updates"] if u.task_id == "a"] == ["same", "same", "fixed"]


def test_make_conclude_node_is_deprecated_but_still_settles(workspace: Path) -> None:
    with pytest.warns(DeprecationWarning, match="make_conclude_node"):
        conclude = make_conclude_node(AimeConfig(workspace=workspace, max_actor_steps=1))
    task = Task(id="a", title="Task a", status="in_progress", attempts=1)
    runtime = Runtime(context=None, stream_writer=lambda _: None)
    state: dict[str, Any] = {"task": task, "messages": [], "steps": 1}
    out = conclude(state, runtime=runtime)
    assert out["tasks"]["a"].status == "failed" and out["result"].status == "failed"
    done = TaskResult(status="completed", summary="ok")
    assert conclude({**state, "result": done}, runtime=runtime) == {}


def test_a_second_submit_result_in_one_reply_is_refused(scripted_graph: GraphFactory) -> None:
    # Two results in one reply used to be two writes to `result` in one step: an
    # InvalidUpdateError that escaped the run.
    twice = {"calls": [call("submit_result", status="completed", summary=s) for s in "AB"]}
    graph, model = scripted_graph(
        {"planner": [plan({"id": "a", "title": "A"})], "actors": {"a": [twice]}}
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result == TaskResult(status="completed", summary="A")
    assert [u.message for u in out["updates"] if u.task_id == "a"] == ["A"]
