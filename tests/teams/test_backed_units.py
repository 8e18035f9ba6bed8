"""Agent units backed by agents of their own (``AgentUnit(agent=...)``): a
``create_agent`` loop, a stand-in for a deepagents agent and users' own graphs,
assigned by the planner alone or in a team; their usage, and an ``interrupt()``
inside one answered with ``Command(resume=...)`` while the sibling's work is not
repeated.

deepagents itself is not installed here: deepagents 0.7.32 requires
langchain-google-genai>=4.4.2, whose google-genai caps tenacity below 9.2, and
aimegraph pins tenacity>=9.2. The stand-in (:func:`deep_agent`) is built as
``create_deep_agent`` builds one, from the same LangChain parts: ``create_agent``
with ``TodoListMiddleware`` (a ``todos`` channel), a files middleware (a ``files``
channel with a merging reducer, as deepagents' ``FilesystemMiddleware``) and a
``task`` tool that runs a compiled sub-agent on the parent's state, minus its
messages and todos, and hands the sub-agent's files and last answer back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware, TodoListMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from pydantic import ValidationError

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from tests.conftest import Cli
from tests.human_scenarios import scenario_spec
from tests.scripted import plan, spec, submit


class ToolingFakeModel(GenericFakeChatModel):
    """A fake chat model ``create_agent`` can bind tools to (it replies as scripted)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolingFakeModel:  # type: ignore[override]
        return self


def replies(*messages: AIMessage) -> Iterator[AIMessage]:
    return iter(messages)


def used(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


@tool
def q3_figures(region: str) -> str:
    """The Q3 figures of a region."""
    return f"{region}: 48213"


def counter_agent() -> Any:
    model = ToolingFakeModel(
        messages=replies(
            AIMessage(
                "",
                tool_calls=[{"name": "q3_figures", "args": {"region": "EU"}, "id": "c1"}],
                usage_metadata=used(100, 10),  # type: ignore[arg-type]
            ),
            AIMessage("The Q3 total is 48213.", usage_metadata=used(150, 20)),  # type: ignore[arg-type]
        )
    )
    return create_agent(model, tools=[q3_figures])


def merge_files(left: dict[str, str] | None, right: dict[str, str]) -> dict[str, str]:
    """The files channel's reducer: writes add or replace files (deepagents' keeps
    file data and deletions too)."""
    return {**(left or {}), **right}


class FilesState(AgentState[Any]):
    files: Annotated[NotRequired[dict[str, str]], merge_files]


@tool
def write_file(path: str, content: str, runtime: ToolRuntime) -> Command[Any]:
    """Write a file to the agent's files."""
    done = ToolMessage(f"wrote {path}", tool_call_id=runtime.tool_call_id or "")
    return Command(update={"files": {path: content}, "messages": [done]})


class FilesMiddleware(AgentMiddleware[FilesState]):
    """A ``files`` channel and tools to write and read it (deepagents'
    ``FilesystemMiddleware`` in its default state-backed form, cut down); ``read``
    gets what each read found."""

    state_schema = FilesState

    def __init__(self, read: list[str]) -> None:
        super().__init__()

        @tool
        def read_file(path: str, runtime: ToolRuntime) -> str:
            """Read a file from the agent's files."""
            read.append(str(runtime.state.get("files", {}).get(path, f"no file {path}")))
            return read[-1]

        self.tools = [write_file, read_file]


SUB_STATE_EXCLUDED = ("messages", "todos", "structured_response")
"""What a sub-agent neither gets from its parent nor hands back (as deepagents)."""


def task_tool(subagents: dict[str, Any], seen: list[dict[str, Any]]) -> Any:
    """deepagents' ``task`` tool: runs the named sub-agent on the description, with
    the parent's other state; returns its state update and last answer. ``seen``
    gets the todos and the runtime context it was called with."""

    @tool
    def task(description: str, subagent_type: str, runtime: ToolRuntime) -> Command[Any]:
        """Hand a self-contained piece of work to a sub-agent; returns its answer."""
        seen.append({"todos": runtime.state.get("todos"), "context": runtime.context})
        state = {k: v for k, v in runtime.state.items() if k not in SUB_STATE_EXCLUDED}
        out = subagents[subagent_type].invoke({**state, "messages": [HumanMessage(description)]})
        update = {k: v for k, v in out.items() if k not in SUB_STATE_EXCLUDED}
        answer = ToolMessage(out["messages"][-1].text, tool_call_id=runtime.tool_call_id or "")
        return Command(update={**update, "messages": [answer]})

    return task


def deep_agent(read: list[str], seen: list[dict[str, Any]]) -> Any:
    """A stand-in for a deepagents agent (see the module's docstring): it plans
    todos, hands the lookup to a sub-agent (which notes the figure in a file), reads
    the file and answers with what it read. ``read`` gets what it read, ``seen``
    what the ``task`` tool saw."""
    figures = ToolingFakeModel(
        messages=replies(
            AIMessage("", tool_calls=[call_of("q3_figures", "s1", region="EU")],
                      usage_metadata=used(40, 4)),  # type: ignore[arg-type]
            AIMessage("", tool_calls=[call_of("write_file", "s2", path="q3.txt",
                                              content="EU: 48213")],
                      usage_metadata=used(50, 5)),  # type: ignore[arg-type]
            AIMessage("Noted the EU figure in q3.txt.", usage_metadata=used(60, 6)),  # type: ignore[arg-type]
        )
    )  # fmt: skip
    counter = create_agent(figures, tools=[q3_figures], middleware=[FilesMiddleware([])])
    todos = [
        {"content": "Find the EU Q3 figure", "status": "in_progress"},
        {"content": "Report it", "status": "pending"},
    ]

    def parent_replies() -> Iterator[AIMessage]:
        yield AIMessage(
            "", tool_calls=[call_of("write_todos", "p1", todos=todos)], usage_metadata=used(100, 10)
        )  # type: ignore[arg-type]
        yield AIMessage(
            "",
            tool_calls=[
                call_of("task", "p2", subagent_type="counter", description="Find the EU Q3 figure")
            ],
            usage_metadata=used(110, 11),
        )  # type: ignore[arg-type]
        yield AIMessage(
            "", tool_calls=[call_of("read_file", "p3", path="q3.txt")], usage_metadata=used(120, 12)
        )  # type: ignore[arg-type]
        # The answer is made once the file was read: it says what the files held.
        yield AIMessage(f"The Q3 total is {read[-1]}.", usage_metadata=used(130, 13))  # type: ignore[arg-type]  # fmt: skip

    return create_agent(
        ToolingFakeModel(messages=parent_replies()),
        tools=[task_tool({"counter": counter}, seen)],
        middleware=[TodoListMiddleware(), FilesMiddleware(read)],
    )


def call_of(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def asking_graph(seen: list[str]) -> Any:
    """A user's own graph with a ``messages`` channel, whose node asks a human with
    ``interrupt()``."""

    def ask(state: MessagesState) -> dict[str, Any]:
        seen.append(state["messages"][-1].text)
        answer = interrupt("Which region?")
        return {"messages": [AIMessage(f"Region chosen: {answer}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile()


def noting_graph(runs: list[str], reply: str) -> Any:
    """A user's graph that notes each run and replies ``reply`` (no usage reported)."""

    def note(state: MessagesState) -> dict[str, Any]:
        runs.append(state["messages"][-1].text)
        return {"messages": [AIMessage(reply)]}

    builder = StateGraph(MessagesState)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    return builder.compile()


# Units for `aimegraph run --agents tests.teams.test_backed_units:CLI_UNITS`.
CLI_ASKED: list[str] = []
CLI_SIBLING_RUNS: list[str] = []
CLI_UNITS = [
    AgentUnit(name="asker", description="Asks.", agent=asking_graph(CLI_ASKED)),
    AgentUnit(name="sibling", description="Sums.", agent=noting_graph(CLI_SIBLING_RUNS, "sum 7")),
]


def aime(model: ScriptedChatModel, units: list[AgentUnit], workspace: Path, **kw: Any) -> Any:
    return build_aime_graph(model, agents=units, config=AimeConfig(workspace=workspace), **kw)


def test_a_create_agent_unit_does_its_task_and_its_usage_counts(workspace: Path) -> None:
    units = [AgentUnit(name="counter", description="Counts sales.", agent=counter_agent())]
    scenario = {
        "planner": [plan(spec("t1", agent="counter"), spec("t2", "t1"))],
        "actors": {"t2": [submit("Reported: {dependency_results}")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    out = aime(model, units, workspace).invoke({"goal": "Report the Q3 total"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["t1"].result.summary == "The Q3 total is 48213."
    # The next task got the unit's result as any dependency's.
    assert "The Q3 total is 48213." in model.prompts("actor")[0]
    t1 = out["usage"].by_task["t1"]
    assert (t1.llm_calls, t1.input_tokens, t1.output_tokens, t1.tool_calls) == (2, 250, 30, 1)
    assert out["usage"].input_tokens >= 250


def test_a_deep_agent_unit_plans_delegates_and_keeps_files(workspace: Path) -> None:
    """The deepagents stand-in (todos, a files channel, a ``task`` sub-agent) as a
    unit the planner assigns, run as a subgraph on the run's checkpointer."""
    read: list[str] = []
    seen: list[dict[str, Any]] = []
    units = [AgentUnit(name="deep", description="Researches.", agent=deep_agent(read, seen))]
    scenario = {
        "planner": [plan(spec("t1", agent="deep"), spec("t2", "t1"))],
        "actors": {"t2": [submit("Reported: {dependency_results}")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = aime(model, units, workspace, checkpointer=InMemorySaver(serde=make_serializer()))
    out = graph.invoke({"goal": "Report the Q3 total"}, thread_config("deep"))
    assert out["status"] == "succeeded"
    # The todos were in the agent's state when it delegated, and its runtime context
    # was its own (none), not the run's AimeConfig; the sub-agent's file came back
    # through the files channel, and the parent read it.
    todos = [
        {"content": "Find the EU Q3 figure", "status": "in_progress"},
        {"content": "Report it", "status": "pending"},
    ]
    assert seen == [{"todos": todos, "context": None}]
    assert read == ["EU: 48213"]
    assert out["tasks"]["t1"].result.summary == "The Q3 total is EU: 48213."
    assert "The Q3 total is EU: 48213." in model.prompts("actor")[0]
    # Usage counts every call made inside the agent: the parent's four (in its
    # messages) and the sub-agent's three inside its ``task`` tool (which never reach
    # the parent's messages), each once.
    t1 = out["usage"].by_task["t1"]
    assert (t1.llm_calls, t1.input_tokens, t1.output_tokens) == (4 + 3, 460 + 150, 46 + 15)
    assert t1.tool_calls == 3 + 2


def first_of_a_team(unit: AgentUnit, workspace: Path) -> tuple[Any, ScriptedChatModel]:
    """A sequential team of ``unit`` then an aimegraph writer on one task: the run's
    output and the scripted model (whose writer's prompt shows what ``unit`` handed on)."""
    units = [unit, AgentUnit(name="writer", description="Writes reports.")]
    team = {"mode": "sequential", "members": [unit.name, "writer"], "max_rounds": 1}
    scenario = {
        "planner": [plan(spec("t1", team=team))],
        "actors": {"t1/writer": [submit("Report: 48213")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    out = aime(model, units, workspace).invoke({"goal": "Report the Q3 total"})
    assert [m.member for m in out["tasks"]["t1"].members] == [unit.name, "writer"]
    return out, model


def test_a_deep_agent_unit_is_a_team_member(workspace: Path) -> None:
    read: list[str] = []
    unit = AgentUnit(name="deep", description="Researches.", agent=deep_agent(read, []))
    out, model = first_of_a_team(unit, workspace)
    task = out["tasks"]["t1"]
    assert task.members[0].summary == "The Q3 total is EU: 48213." and read == ["EU: 48213"]
    assert "The Q3 total is EU: 48213." in model.prompts("actor")[0]
    assert task.result.summary == "Report: 48213"
    assert out["usage"].by_member["deep"].llm_calls == 4 + 3  # the sub-agent's calls too


def test_an_agent_reporting_no_usage_is_said_to(workspace: Path) -> None:
    seen: list[str] = []
    units = [
        AgentUnit(name="echo", description="Echoes.", agent=noting_graph(seen, "done by echo"))
    ]
    scenario = {
        "planner": [plan(spec("t1", agent="echo", description="Say the figure"))],
        "reporter": [{"text": "{all_results}"}],
    }
    out = aime(ScriptedChatModel.from_dict(scenario), units, workspace).invoke({"goal": "Go"})
    assert out["tasks"]["t1"].result.summary == "done by echo"
    # It was handed the goal and the task as one human message.
    assert "Go" in seen[0] and "Say the figure" in seen[0]
    assert out["usage"].by_task["t1"].llm_calls == 0
    assert any(u.status == "usage_unknown" and u.task_id == "t1" for u in out["updates"])
    # The usage records it: the task's share is unknown, not zero.
    assert out["usage"].unknown_tasks == ["t1"] and out["usage"].unknown_members == []


def test_an_interrupt_inside_a_unit_waits_for_a_human_and_the_sibling_runs_once(
    workspace: Path,
) -> None:
    seen: list[str] = []
    units = [
        AgentUnit(name="asker", description="Asks.", agent=asking_graph(seen)),
        AgentUnit(name="writer", description="Writes."),
    ]
    scenario = {
        "planner": [plan(spec("t1", agent="asker"), spec("t2", agent="writer"))],
        "actors": {"t2": [submit("sibling done")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = aime(model, units, workspace, checkpointer=InMemorySaver(serde=make_serializer()))
    config = thread_config("asks")
    graph.invoke({"goal": "Pick a region"}, config)
    (pending,) = graph.get_state(config).interrupts
    assert pending.value == "Which region?"
    out = graph.invoke(Command(resume="EU"), config)
    assert out["status"] == "succeeded"
    assert out["tasks"]["t1"].result.summary == "Region chosen: EU"
    assert out["tasks"]["t2"].result.summary == "sibling done"
    # The sibling's actor ran once; the agent was handed its task once.
    assert len(model.prompts("actor")) == 1 and len(seen) == 2  # the node re-ran to resume
    assert seen[0] == seen[1]


@tool
def ask_region() -> str:
    """Ask a human which region to report."""
    return str(interrupt("Which region?"))


def test_a_unit_resumed_after_an_interrupt_counts_each_of_its_calls_once(
    workspace: Path,
) -> None:
    """The agent's first call (before it paused for a human) is in its messages
    only, its second in its messages and seen by the callback: two calls."""
    model = ToolingFakeModel(
        messages=replies(
            AIMessage("", tool_calls=[call_of("ask_region", "a1")], usage_metadata=used(30, 3)),  # type: ignore[arg-type]
            AIMessage("Region: EU", usage_metadata=used(40, 4)),  # type: ignore[arg-type]
        )
    )  # fmt: skip
    units = [AgentUnit(name="asker", description="Asks.", agent=create_agent(model, [ask_region]))]
    scenario = {"planner": [plan(spec("t1", agent="asker"))], "reporter": [{"text": "done"}]}
    graph = aime(
        ScriptedChatModel.from_dict(scenario),
        units,
        workspace,
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    config = thread_config("asks-usage")
    graph.invoke({"goal": "Pick a region"}, config)
    out = graph.invoke(Command(resume="EU"), config)
    assert out["tasks"]["t1"].result.summary == "Region: EU"
    t1 = out["usage"].by_task["t1"]
    assert (t1.llm_calls, t1.input_tokens, t1.output_tokens) == (2, 70, 7)


class WrappingModel(BaseChatModel):
    """A chat model that hands on an inner model's reply as its own (a router, a
    cache): one call, seen by callbacks twice with one id."""

    inner: BaseChatModel

    @property
    def _llm_type(self) -> str:
        return "wrapping"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.inner.invoke(messages))])


def test_a_reply_handed_on_by_a_wrapping_model_counts_once(workspace: Path) -> None:
    inner = ToolingFakeModel(messages=replies(AIMessage("EU", usage_metadata=used(30, 3))))  # type: ignore[arg-type]
    wrapping = WrappingModel(inner=inner)

    def answer(state: MessagesState) -> dict[str, Any]:
        # Its own answer, made from the model's (as a sub-agent's inside a tool).
        return {"messages": [AIMessage(f"Region: {wrapping.invoke(state['messages']).text}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    units = [AgentUnit(name="router", description="Routes.", agent=builder.compile())]
    scenario = {"planner": [plan(spec("t1", agent="router"))], "reporter": [{"text": "done"}]}
    out = aime(ScriptedChatModel.from_dict(scenario), units, workspace).invoke({"goal": "Pick"})
    t1 = out["usage"].by_task["t1"]
    assert (t1.llm_calls, t1.input_tokens) == (1, 30)
    assert out["tasks"]["t1"].result.summary == "Region: EU"


def test_a_backed_unit_is_a_team_member(workspace: Path) -> None:
    unit = AgentUnit(name="counter", description="Counts sales.", agent=counter_agent())
    out, model = first_of_a_team(unit, workspace)
    task = out["tasks"]["t1"]
    assert task.members[0].summary == "The Q3 total is 48213."
    assert "The Q3 total is 48213." in model.prompts("actor")[0]
    assert out["usage"].by_member["counter"].input_tokens == 250
    assert out["usage"].unknown_tasks == []  # create_agent's replies report usage


def test_a_team_task_with_a_member_reporting_no_usage_prints_what_was_counted_and_more(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from aimegraph.cli.report import print_summary, summary

    units = [
        AgentUnit(name="counter", description="Counts sales.", agent=counter_agent()),
        AgentUnit(name="echo", description="Echoes.", agent=noting_graph([], "echoed")),
    ]
    team = {"mode": "sequential", "members": ["counter", "echo"], "max_rounds": 1}
    scenario = {"planner": [plan(spec("t1", team=team))], "reporter": [{"text": "{all_results}"}]}
    out = aime(ScriptedChatModel.from_dict(scenario), units, workspace).invoke({"goal": "Go"})
    assert (out["usage"].unknown_tasks, out["usage"].unknown_members) == (["t1"], ["echo"])
    print_summary(summary(out, "team", "succeeded"), Console(width=200))
    lines = capsys.readouterr().out.splitlines()
    assert (
        "    t1: 2 LLM calls, 250 in / 30 out tokens, 1 tool call, "
        "more unknown (an agent reports no usage)"
    ) in lines
    assert "    counter: 2 LLM calls, 250 in / 30 out tokens, 1 tool call" in lines
    assert "    echo: unknown (its agent reports no usage)" in lines


def test_a_backed_unit_takes_no_model_or_tools() -> None:
    with pytest.raises(ValidationError, match="takes no model or tool_bundles"):
        AgentUnit(name="x", description="X.", agent=counter_agent(), model="scripted:demo")
    with pytest.raises(ValidationError, match="named by its http"):
        AgentUnit.model_validate({"name": "x", "description": "X.", "agent": "billing-agent"})
    a2a = AgentUnit.model_validate({"name": "x", "description": "X.", "agent": "http://h:1"})
    assert a2a.agent == "http://h:1"


def test_an_interrupt_inside_a_unit_is_answered_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    scenario = {
        "planner": [plan(spec("t1", agent="asker"), spec("t2", agent="sibling"))],
        "reporter": [{"text": "{all_results}"}],
    }
    agents = "tests.teams.test_backed_units:CLI_UNITS"
    model = scenario_spec(tmp_path, scenario)
    code, summary = cli.run("unit-asks", "--agents", agents, model=model)
    assert code == 5
    (waiting,) = summary["interrupts"]
    assert waiting["value"] == "Which region?"
    code, text = cli("show", "unit-asks")
    assert "Which region?" in text
    code, summary = cli.json("resume", "unit-asks", "--answer", "EU")
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["t1"]["result"]["summary"] == "Region chosen: EU"
    assert summary["tasks"]["t2"]["result"]["summary"] == "sum 7"
    assert len(CLI_SIBLING_RUNS) == 1  # the sibling's work was not repeated
    # Neither agent reports usage: their tasks' shares print as unknown, not as 0.
    code, text = cli("show", "unit-asks")
    lines = text.splitlines()
    assert "    t1: unknown (its agent reports no usage)" in lines
    assert "    t2: unknown (its agent reports no usage)" in lines
    (total,) = [line for line in lines if line.startswith("usage: ")]
    assert total.endswith(", more unknown (t1, t2)") or total.endswith(", more unknown (t2, t1)")


def test_an_interrupt_inside_a_team_member_resumes_without_redoing_the_turns_before(
    workspace: Path,
) -> None:
    asked: list[str] = []
    noted: list[str] = []
    units = [
        AgentUnit(name="sibling", description="Sums.", agent=noting_graph(noted, "sum 7")),
        AgentUnit(name="asker", description="Asks.", agent=asking_graph(asked)),
    ]
    team = {"mode": "sequential", "members": ["sibling", "asker"], "max_rounds": 1}
    scenario = {"planner": [plan(spec("t1", team=team))], "reporter": [{"text": "{all_results}"}]}
    model = ScriptedChatModel.from_dict(scenario)
    graph = aime(model, units, workspace, checkpointer=InMemorySaver(serde=make_serializer()))
    config = thread_config("team-asks")
    graph.invoke({"goal": "Pick a region"}, config)
    (pending,) = graph.get_state(config).interrupts
    assert pending.value == "Which region?"
    # The member was handed the previous member's result in its brief.
    assert "sum 7" in asked[0]
    out = graph.invoke(Command(resume="EU"), config)
    task = out["tasks"]["t1"]
    assert [m.member for m in task.members] == ["sibling", "asker"]
    assert task.result.summary == "Region chosen: EU" and len(noted) == 1


def test_an_a2a_unit_without_the_extra_is_refused_when_the_graph_is_built(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aimegraph.graphs.backed_unit as backed

    monkeypatch.setattr(backed, "find_spec", lambda name: None)
    units = [AgentUnit(name="billing", description="Bills.", agent="http://127.0.0.1:9")]
    with pytest.raises(ValueError, match=r"install the a2a extra"):
        aime(ScriptedChatModel.from_dict({}), units, workspace)
