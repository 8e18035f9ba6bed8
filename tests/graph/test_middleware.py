"""Issue 41 (3): LangChain's own middleware on the actor's model and tool calls.

Each prebuilt class changes a run the way its documentation says, and the same run
without it does not change; scripted models stand in for the providers."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    HumanInTheLoopMiddleware,
    LLMToolSelectorMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
    after_model,
    before_agent,
    before_model,
    wrap_model_call,
    wrap_tool_call,
)
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.scripted import call, plan, submit

from aimegraph import AimeConfig, Task, build_actor_graph, build_aime_graph, default_registry
from aimegraph.middleware import MiddlewareError
from aimegraph.models.offline.scripted import ScriptedChatModel

READ = call("read_file", path="notes.txt")
READ_AGAIN = call("read_file", path="notes.txt", offset=1)


class RecordingModel(ScriptedChatModel):
    """The scripted actor, noting the tools bound to each of its calls."""

    bound: list[list[str]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.bound.append([t["function"]["name"] for t in kwargs.get("tools") or []])
        return super()._generate(messages, *args, **kwargs)


class ChoosingModel(FakeListChatModel):
    """A stand-in for a tool-selection model: it answers the schema it is bound to
    with ``{"tools": [...]}``, as a provider's structured output would."""

    chosen: list[str] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(schema=tools[0])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        name = kwargs["schema"].get("title", "ToolSelectionResponse")
        reply = AIMessage(
            content="",
            tool_calls=[{"name": name, "args": {"tools": self.chosen}, "id": "choice"}],
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "notes.txt").write_text("Contact alice@example.com about the report.\n")
    return workspace


def actor(
    workspace: Path,
    script: list[dict[str, Any]],
    middleware: Sequence[Any] = (),
    *,
    model: Any = None,
    title: str = "Task a",
    bundles: tuple[str, ...] = ("files",),
    checkpointer: Any = None,
    registry: Any = None,
    **config: Any,
) -> Any:
    """An actor graph over ``script`` (task ``a``) and its input."""
    model = model or ScriptedChatModel.from_dict({"actors": {"a": script}})
    graph = build_actor_graph(
        model,
        registry=registry or default_registry(workspace),
        config=AimeConfig(workspace=workspace, **config),
        middleware=list(middleware) or None,
        checkpointer=checkpointer,
    )
    task = Task(id="a", title=title, status="in_progress", attempts=1, tool_bundles=bundles)
    return graph, {"goal": "g", "task": task, "dependency_results": {}}


def run(
    workspace: Path, script: list[dict[str, Any]], middleware: Sequence[Any] = (), **kw: Any
) -> dict[str, Any]:
    """The actor's whole state after the run (its conversation included)."""
    graph, inputs = actor(workspace, script, middleware, checkpointer=InMemorySaver(), **kw)
    thread = {"configurable": {"thread_id": "t"}}
    graph.invoke(inputs, thread)
    return dict(graph.get_state(thread).values)


def observations(out: dict[str, Any]) -> list[str]:
    return [m.text for m in out.get("messages", []) if isinstance(m, ToolMessage)]


def test_pii_middleware_redacts_the_task_and_tool_outputs_before_the_model_sees_them(
    notes: Path,
) -> None:
    script = [READ, submit("done")]
    model = ScriptedChatModel.from_dict({"actors": {"a": script}})
    title = "Mail bob@example.com the summary"
    pii = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    graph, inputs = actor(notes, script, [pii], model=model, title=title)
    graph.invoke(inputs)
    seen = model.prompts("actor")[-1]
    assert "alice@example.com" not in seen and "bob@example.com" not in seen
    assert seen.count("[REDACTED_EMAIL]") == 2

    plain = ScriptedChatModel.from_dict({"actors": {"a": script}})
    graph, inputs = actor(notes, script, model=plain, title=title)
    graph.invoke(inputs)
    assert "alice@example.com" in plain.prompts("actor")[-1]


def test_pii_middleware_blocking_fails_the_task_as_data(notes: Path) -> None:
    pii = PIIMiddleware("email", strategy="block", apply_to_tool_results=True)
    task = run(notes, [READ, submit("done")], [pii])["tasks"]["a"]
    assert task.status == "failed"
    assert task.result.summary.startswith(
        "middleware PIIMiddleware[email].before_model failed: PIIDetectionError"
    )


def test_summarization_middleware_folds_old_turns_into_a_summary(notes: Path) -> None:
    # The summary stands in for the folded steps as aimegraph's own would: the scripted
    # actor counts them from its first line, and it names the task it is about.
    summariser = FakeListChatModel(
        responses=['<task id="a">\nSummary of your first 1 steps: notes.txt names alice.']
    )
    script = [READ, READ_AGAIN, submit("done")]
    model = ScriptedChatModel.from_dict({"actors": {"a": script}})
    folding = SummarizationMiddleware(
        model=summariser, trigger=("messages", 5), keep=("messages", 2)
    )
    out = run(notes, script, [folding], model=model)
    assert out["tasks"]["a"].status == "completed"
    last = model.prompts("actor")[-1]
    assert "Here is a summary of the conversation to date" in last
    assert "ontact alice@example.com" in last  # the kept turn's observation (offset 1)
    assert "Contact alice" not in last  # the folded one's
    # The state holds the folded conversation, its system prompt still first.
    kinds = [type(m).__name__ for m in out["messages"]]
    assert kinds[:2] == ["SystemMessage", "HumanMessage"]
    assert not any("Contact alice" in m.text for m in out["messages"])

    plain = ScriptedChatModel.from_dict({"actors": {"a": script}})
    run(notes, script, model=plain)
    assert "summary of the conversation" not in plain.prompts("actor")[-1]


def test_model_call_limit_middleware_ends_the_task_at_its_limit(notes: Path) -> None:
    script = [READ, READ_AGAIN, submit("done")]
    limited = run(notes, script, [ModelCallLimitMiddleware(run_limit=2)])["tasks"]["a"]
    assert limited.status == "failed"
    assert limited.result.summary.startswith("stopped by ModelCallLimitMiddleware")
    assert "run limit (2/2)" in limited.result.summary
    assert run(notes, script)["tasks"]["a"].status == "completed"

    raising = ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")
    failed = run(notes, script, [raising])["tasks"]["a"]
    assert failed.status == "failed"
    assert "ModelCallLimitExceededError: Model call limits exceeded" in failed.result.summary


def test_tool_call_limit_middleware_blocks_calls_past_its_limit(notes: Path) -> None:
    script = [READ, READ_AGAIN, submit("done")]
    limit = ToolCallLimitMiddleware(tool_name="read_file", run_limit=1)
    out = run(notes, script, [limit])
    assert out["tasks"]["a"].status == "completed"
    seen = observations(out)
    assert "Contact alice" in seen[0]
    assert "limit" in seen[1] and "Contact alice" not in seen[1]
    assert out["thread_tool_call_count"] == {"read_file": 1}  # the middleware's own state key
    assert observations(run(notes, script))[1].startswith("ontact alice")

    ending = ToolCallLimitMiddleware(tool_name="read_file", run_limit=1, exit_behavior="end")
    task = run(notes, script, [ending])["tasks"]["a"]
    assert task.status == "failed"
    assert "stopped by ToolCallLimitMiddleware[read_file]" in task.result.summary


def test_model_fallback_middleware_answers_when_the_model_fails(notes: Path) -> None:
    script = [READ, submit("done")]
    down = ScriptedChatModel.from_dict(
        {"actors": {"a": [{"error": "other", "message": "provider down"}] * 3}}
    )
    backup = ScriptedChatModel.from_dict({"name": "backup", "actors": {"a": script}})
    out = run(notes, script, [ModelFallbackMiddleware(backup)], model=down)
    assert out["tasks"]["a"].status == "completed"
    assert out["usage"].llm_calls == 2
    assert set(out["usage"].by_model) == {backup.model_name}

    failed = run(notes, script, model=down)["tasks"]["a"]
    assert failed.status == "failed" and "provider down" in failed.result.summary


def test_llm_tool_selector_middleware_binds_only_the_tools_it_picks(notes: Path) -> None:
    script = [READ, submit("done")]
    model = RecordingModel.from_dict({"actors": {"a": script}})
    model.bound = []
    selector = ChoosingModel(responses=[""], chosen=["read_file"])
    out = run(notes, script, [LLMToolSelectorMiddleware(model=selector, max_tools=1)], model=model)
    assert out["tasks"]["a"].status == "completed"
    # The actor's reports are bound after whatever the selection keeps.
    assert model.bound[0] == ["read_file", "update_progress", "submit_result"]

    model.bound = []
    run(notes, script, model=model)
    assert {"write_file", "list_dir"} <= set(model.bound[0])


FLAKY_CALLS = itertools.count()


@tool
def flaky(query: str) -> str:
    """Fails on two calls of three (a transient fault), answers on the third."""
    if next(FLAKY_CALLS) % 3 < 2:
        raise ConnectionError("connection reset")
    return f"result for {query}"


def test_tool_retry_middleware_retries_a_failing_tool(workspace: Path) -> None:
    registry = default_registry(workspace)
    registry.add_bundle("web", "flaky search", [flaky])
    script = [call("flaky", query="q"), submit("done")]
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    global FLAKY_CALLS
    FLAKY_CALLS = itertools.count()
    out = run(workspace, script, [retry], registry=registry, bundles=("web",))
    assert observations(out)[0] == "result for q"

    FLAKY_CALLS = itertools.count()
    out = run(workspace, script, registry=registry, bundles=("web",))
    assert "ConnectionError: connection reset" in observations(out)[0]


def test_human_in_the_loop_middleware_is_the_engines_tool_approval(notes: Path) -> None:
    script = [call("write_file", path="out.txt", content="hi"), submit("done")]
    gate = HumanInTheLoopMiddleware(interrupt_on={"write_file": True})
    graph, inputs = actor(notes, script, [gate], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    paused = graph.invoke(inputs, thread)
    (pause,) = paused["__interrupt__"]
    assert pause.value["kind"] == "approve_tool" and pause.value["tool"] == "write_file"
    allowed = pause.value["review_configs"][0]["allowed_decisions"]
    assert allowed == ["approve", "edit", "reject", "respond"]
    answer = {"decisions": [{"type": "respond", "message": "Written by hand instead."}]}
    graph.invoke(Command(resume=answer), thread)
    assert observations(graph.get_state(thread).values)[0] == "Written by hand instead."
    assert not (notes / "out.txt").exists()

    # Without it the call runs; with a narrower review an edit is asked again.
    run(notes, script)
    assert (notes / "out.txt").read_text() == "hi"
    narrow = HumanInTheLoopMiddleware(
        interrupt_on={"write_file": {"allowed_decisions": ["approve", "reject"]}}
    )
    graph, inputs = actor(notes, script, [narrow], checkpointer=InMemorySaver())
    graph.invoke(inputs, thread)
    edit = {"type": "edit", "edited_action": {"name": "write_file", "args": {"path": "x"}}}
    again = graph.invoke(Command(resume={"decisions": [edit]}), thread)
    assert "edit is not allowed for write_file" in again["__interrupt__"][0].value["error"]


def test_decorated_hooks_run_on_model_and_tool_calls_sync_and_async(notes: Path) -> None:
    seen: list[str] = []

    @before_model
    def count(state: AgentState[Any], runtime: Any) -> None:
        seen.append(f"before:{len(state['messages'])}")

    @after_model
    def note(state: AgentState[Any], runtime: Any) -> None:
        seen.append("after")

    @wrap_model_call
    def around(request: Any, handler: Any) -> Any:
        seen.append(f"model:{request.system_message is not None}")
        return handler(request)

    @wrap_tool_call
    def shout(request: Any, handler: Any) -> Any:
        result = handler(request)
        return result.model_copy(update={"content": result.text.upper()})

    script = [READ, submit("done")]
    out = run(notes, script, [count, note, around, shout])
    assert observations(out)[0].startswith("CONTACT ALICE")
    assert seen == ["before:1", "model:True", "after", "before:3", "model:True", "after"]

    seen.clear()
    graph, inputs = actor(notes, script, [count, note, around, shout], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    asyncio.run(graph.ainvoke(inputs, thread))
    assert observations(graph.get_state(thread).values)[0].startswith("CONTACT ALICE")
    assert seen == ["before:1", "model:True", "after", "before:3", "model:True", "after"]


def test_hooks_aimegraph_cannot_honour_are_refused_when_the_graph_is_built(
    workspace: Path,
) -> None:
    @before_agent
    def opening(state: AgentState[Any], runtime: Any) -> None:
        return None

    with pytest.raises(MiddlewareError, match="before_agent is not honoured"):
        actor(workspace, [], [opening])

    @wrap_tool_call
    def tools_only(request: Any, handler: Any) -> Any:
        return handler(request)

    model = ScriptedChatModel.from_dict({"actors": {}})
    with pytest.raises(MiddlewareError, match="wrap_tool_call is not honoured on the planner"):
        build_aime_graph(model, middleware={"planner": [tools_only]})
    with pytest.raises(MiddlewareError, match="unknown roles"):
        build_aime_graph(model, middleware={"critic": [tools_only]})

    class Clashing(AgentMiddleware):
        state_schema = type("S", (AgentState,), {"__annotations__": {"steps": int}})  # type: ignore[assignment]

    with pytest.raises(MiddlewareError, match=r"state keys \['steps'\]"):
        actor(workspace, [], [Clashing()])

    when = HumanInTheLoopMiddleware(
        interrupt_on={"write_file": {"allowed_decisions": ["approve"], "when": lambda r: True}}
    )
    with pytest.raises(MiddlewareError, match="'when' predicate"):
        actor(workspace, [], [when])


def test_actor_middleware_through_build_aime_graph(scripted_graph: Any, notes: Path) -> None:
    scenario = {
        "planner": [plan({"id": "a", "title": "Read", "tool_bundles": ["files"]})],
        "actors": {"a": [READ, READ_AGAIN, submit("done")]},
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=notes),
        middleware=[ModelCallLimitMiddleware(run_limit=2)],
    )
    out = graph.invoke({"goal": "Read the notes"})
    assert out["tasks"]["a"].result.summary.startswith("stopped by ModelCallLimitMiddleware")
    assert isinstance(out["messages"][0], HumanMessage)


def test_planner_reporter_and_verifier_honour_wrap_model_call(notes: Path) -> None:
    scenario: dict[str, Any] = {
        "planner": [plan({"id": "a", "title": "Read", "tool_bundles": ["files"]})],
        "actors": {"a": [submit("alice")]},
        "reporter": [{"text": "alice"}],
    }
    down = ScriptedChatModel.from_dict({"planner": [{"error": "other", "message": "down"}]})
    backup = ScriptedChatModel.from_dict({**scenario, "name": "backup"})
    roles: list[str] = []

    @wrap_model_call
    def note_role(request: Any, handler: Any) -> Any:
        roles.append(request.system_message.text.split("\n")[0])
        return handler(request)

    config = AimeConfig(workspace=notes, verify="final")
    graph = build_aime_graph(
        backup,
        models={"planner": down},
        config=config,
        middleware={
            "planner": [ModelFallbackMiddleware(backup)],
            "reporter": [note_role],
            "verifier": [note_role],
        },
    )
    out = graph.invoke({"goal": "Who is in the notes?"})
    assert out["status"] == "succeeded" and out["final_answer"] == "alice"
    assert out["usage"].by_role["planner"].llm_calls == 1
    assert roles == ["# Role: reporter", "# Role: verifier"]
    # Under ainvoke: the fallback's async hook awaited, the sync one in a worker thread.
    roles.clear()
    backup.reset()
    out = asyncio.run(graph.ainvoke({"goal": "Who is in the notes?"}))
    assert out["status"] == "succeeded" and roles == ["# Role: reporter", "# Role: verifier"]

    plain = build_aime_graph(backup, models={"planner": down}, config=config)
    assert plain.invoke({"goal": "Who is in the notes?"})["status"] == "failed"


def test_a_hook_jumping_to_the_end_or_to_the_tools_routes_the_actor(notes: Path) -> None:
    @before_model(can_jump_to=["end"])
    def enough(state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"jump_to": "end", "messages": [AIMessage("one look is enough")]}
        return None

    task = run(notes, [READ, READ_AGAIN, submit("done")], [enough])["tasks"]["a"]
    assert task.status == "failed"
    assert task.result.summary == "stopped by enough: one look is enough"

    @after_model(can_jump_to=["tools"])
    def straight_on(state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        return {"jump_to": "tools"}

    out = run(notes, [READ, submit("done")], [straight_on])
    assert out["tasks"]["a"].status == "completed"
    assert observations(out)[0].startswith("Contact alice")


def test_the_context_budgets_summary_starts_again_when_a_hook_drops_turns() -> None:
    from langchain_core.messages import SystemMessage

    from aimegraph.middleware.calls import HookOutcome
    from aimegraph.nodes.actor_hooks import summary_reset

    turns = [HumanMessage("task", id="t"), AIMessage("a", id="a"), HumanMessage("b", id="b")]
    state = {"messages": [SystemMessage("s", id="s"), *turns], "summarised": 2}
    redacted = [turns[0], AIMessage("[REDACTED]", id="a"), turns[2]]
    assert summary_reset(state, HookOutcome({"messages": redacted}, rewrote=True)) == {}
    folded = [HumanMessage("summary", id="n"), turns[2]]
    assert summary_reset(state, HookOutcome({"messages": folded}, rewrote=True)) == {
        "context_summary": "",
        "summarised": 0,
    }


def test_human_in_the_loop_middleware_is_checked_as_approve_tools_is(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict({"actors": {}})
    typo = HumanInTheLoopMiddleware(interrupt_on={"wrte_file": True})
    with pytest.raises(ValueError, match="wrte_file"):
        build_aime_graph(model, config=AimeConfig(workspace=workspace), middleware=[typo])
    gate = HumanInTheLoopMiddleware(interrupt_on={"write_file": True})
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace), middleware=[gate])
    with pytest.raises(ValueError, match="approve_tools needs a checkpointer"):
        graph.invoke({"goal": "Write the file."})
