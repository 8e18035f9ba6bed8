"""The scripted and fuzz models stream their replies as chunks that add up to the reply
``invoke`` returns, take their next step the same way either way, and answer prompts
that are not the engine's in echo mode without touching the engine's replay."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatResult
from pydantic import BaseModel, Field
from tests.scripted import call, plan, spec, submit

from aimegraph.models.offline.echo import echo_reply, value_for
from aimegraph.models.offline.fuzz import FuzzChatModel, FuzzRates
from aimegraph.models.offline.scripted import Scenario, ScriptedChatModel
from aimegraph.state import PlanUpdate

TASK_PROMPT = [
    SystemMessage("# Role: actor\nYou work on one task."),
    HumanMessage('<task id="a" attempt="1">\nTitle: Add\n</task>'),
]
PLANNER_PROMPT = [SystemMessage("# Role: planner\nPlan."), HumanMessage("Goal:\ng\n\n")]
REPORTER_PROMPT = [SystemMessage("# Role: reporter\nAnswer."), HumanMessage("Results.")]


class Sum(BaseModel):
    """Adds two numbers."""

    a: int
    b: int


def scenario() -> dict[str, Any]:
    return {
        "planner": [plan(spec("a")), plan(spec("b", "a"))],
        "actors": {
            "a": [
                call("calculator", expression="6*7"),
                {"calls": [call("calculator", expression="1+1"), call("python", code="print(1)")]},
                {"raw": "not JSON {"},
                submit("It is 42, as computed by the calculator above."),
            ]
        },
        "reporter": [{"text": "The answer is 42.\n\nIt took two   tries."}],
    }


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    assert chunks, "the stream sent nothing"
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


def same_reply(streamed: BaseMessage, invoked: BaseMessage) -> None:
    assert isinstance(streamed, AIMessage) and isinstance(invoked, AIMessage)
    assert streamed.content == invoked.content
    assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [
        (c["name"], c["args"]) for c in invoked.tool_calls
    ]
    assert len({c["id"] for c in streamed.tool_calls}) == len(streamed.tool_calls)
    assert streamed.usage_metadata == invoked.usage_metadata
    assert streamed.response_metadata["model_name"] == invoked.response_metadata["model_name"]


def bound(model: BaseChatModel) -> Any:
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return expression

    def python(code: str) -> str:
        """Run Python code."""
        return code

    def submit_result(status: str, summary: str) -> str:
        """End the task."""
        return summary

    return model.bind_tools([calculator, python, submit_result])


@pytest.mark.parametrize("with_tools", [True, False])
def test_a_streamed_actor_reply_adds_up_to_the_invoked_one(with_tools: bool) -> None:
    invoking = ScriptedChatModel.from_dict(scenario())
    streaming = ScriptedChatModel.from_dict(scenario())
    conversation: list[BaseMessage] = list(TASK_PROMPT)
    for _ in range(4):
        invoked = (bound(invoking) if with_tools else invoking).invoke(conversation)
        chunks = list((bound(streaming) if with_tools else streaming).stream(conversation))
        assert len(chunks) > 2  # really streamed: words or argument pieces, then the last chunk
        assert chunks[-1].chunk_position == "last"
        same_reply(merged(chunks), invoked)
        conversation.append(invoked)
    assert len(invoking.prompts("actor")) == len(streaming.prompts("actor")) == 4


def test_stream_and_invoke_take_the_planner_entries_in_the_same_order() -> None:
    model = ScriptedChatModel.from_dict(scenario())
    structured = model.with_structured_output(PlanUpdate)
    first = structured.invoke(PLANNER_PROMPT)
    second = list(structured.stream(PLANNER_PROMPT))[-1]
    assert [t.id for t in first.tasks] == ["a"]
    assert [t.id for t in second.tasks] == ["b"]
    # The last entry repeats once the list is used up, streamed or not.
    assert [t.id for t in structured.invoke(PLANNER_PROMPT).tasks] == ["b"]


def test_astream_adds_up_to_the_invoked_reply() -> None:
    invoked = ScriptedChatModel.from_dict(scenario()).invoke(REPORTER_PROMPT)

    async def collect() -> list[AIMessageChunk]:
        model = ScriptedChatModel.from_dict(scenario())
        return [chunk async for chunk in model.astream(REPORTER_PROMPT)]

    chunks = asyncio.run(collect())
    assert [c.text for c in chunks[:3]] == ["The ", "answer ", "is "]
    same_reply(merged(chunks), invoked)


class Shouting(ScriptedChatModel):
    """Overrides the model call, as tests inject behaviour: streams must follow it."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        result = super()._generate(*args, **kwargs)
        message = result.generations[0].message
        message.content = message.text.upper()
        return result

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        result = self._generate(*args, **kwargs)
        result.generations[0].message.content += "!"
        return result


def test_streams_send_what_the_model_call_of_a_subclass_returns() -> None:
    model = Shouting.from_dict(scenario())
    assert merged(list(model.stream(REPORTER_PROMPT))).text.startswith("THE ANSWER IS 42.")

    async def collect() -> list[AIMessageChunk]:
        return [chunk async for chunk in model.astream(REPORTER_PROMPT)]

    assert merged(asyncio.run(collect())).text.endswith("TRIES.!")


def test_a_scripted_error_is_raised_before_any_chunk() -> None:
    model = ScriptedChatModel.from_dict(
        {"planner": [plan(spec("a"))], "actors": {"a": [{"error": "timeout"}]}}
    )
    stream = model.stream(TASK_PROMPT)
    with pytest.raises(TimeoutError):
        next(stream)


def test_usage_is_recorded_by_model_name_when_streaming() -> None:
    model = ScriptedChatModel.from_dict(scenario())
    with get_usage_metadata_callback() as usage:
        list(model.stream(REPORTER_PROMPT))
    assert set(usage.usage_metadata) == {"scripted:inline"}
    assert usage.usage_metadata["scripted:inline"]["output_tokens"] > 0


@pytest.mark.parametrize("seed", range(20))
def test_a_streamed_fuzzed_reply_adds_up_to_the_invoked_one(seed: int) -> None:
    """Reasoning blocks, think tags, tool calls as text, empty replies and transient
    errors come out the same through either path."""

    def fuzz() -> FuzzChatModel:
        return FuzzChatModel(inner=ScriptedChatModel.from_dict(scenario()), seed=seed)

    invoking, streaming = fuzz(), fuzz()
    conversation: list[BaseMessage] = list(TASK_PROMPT)
    for _ in range(4):
        for _attempt in range(2):  # a transient error: the retry is answered
            try:
                invoked = bound(invoking).invoke(conversation)
            except ConnectionError:
                with pytest.raises(ConnectionError):
                    next(bound(streaming).stream(conversation))
                continue
            chunks = list(bound(streaming).stream(conversation))
            assert chunks[-1].chunk_position == "last"
            assert len(chunks) > 1 or not (invoked.content or invoked.tool_calls)
            same_reply(merged(chunks), invoked)
            break
        conversation.append(invoked)
    assert invoking.applied == streaming.applied


def test_fuzzed_list_content_streams_block_by_block() -> None:
    def fuzz(seed: int) -> FuzzChatModel:
        rates = FuzzRates(think=1.0, transient_error=0.0, empty=0.0)
        return FuzzChatModel(inner=ScriptedChatModel.from_dict(scenario()), seed=seed, rates=rates)

    seed = next(s for s in range(50) if isinstance(fuzz(s).invoke(REPORTER_PROMPT).content, list))
    chunks = list(fuzz(seed).stream(REPORTER_PROMPT))
    assert [len(c.content) for c in chunks] == [1, 1, 0]  # a block a chunk, then the last
    streamed = merged(chunks)
    assert [b["type"] for b in streamed.content] == ["reasoning", "text"]  # type: ignore[index]
    same_reply(streamed, fuzz(seed).invoke(REPORTER_PROMPT))


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
def test_json_methods_send_a_structured_entry_as_json_text(method: str) -> None:
    model = ScriptedChatModel.from_dict(scenario())
    raw = model.with_structured_output(PlanUpdate, method=method, include_raw=True).invoke(
        PLANNER_PROMPT
    )
    assert isinstance(raw["raw"], AIMessage) and not raw["raw"].tool_calls
    assert raw["parsing_error"] is None
    assert [t.id for t in raw["parsed"].tasks] == ["a"]
    with pytest.raises(ValueError, match="unknown structured output method"):
        model.with_structured_output(PlanUpdate, method="xml")  # type: ignore[arg-type]


# --- echo mode ---


def echo_model(**scenario_fields: Any) -> ScriptedChatModel:
    return ScriptedChatModel(scenario=Scenario(name="echo", echo=True, **scenario_fields))


def test_echo_mode_leaves_the_engines_prompts_to_the_scenario() -> None:
    model = echo_model(reporter=[{"text": "Scripted answer."}])
    assert model.invoke(REPORTER_PROMPT).content == "Scripted answer."
    assert model.invoke("Hello there").content == "Hello there"
    assert [role for role, _ in model._calls] == ["reporter", "echo"]
    # Without echo, a prompt without a role is the reporter's, as before.
    plain = ScriptedChatModel(scenario=Scenario(reporter=[{"text": "Scripted answer."}]))
    assert plain.invoke("Hello there").content == "Scripted answer."


def test_echo_calls_a_tool_with_arguments_read_from_the_users_message() -> None:
    model = echo_model()

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def greet(name: str) -> str:
        """Greet someone."""
        return name

    tools = model.bind_tools([add, greet])
    reply = tools.invoke("Use greet for 'Ana María', then add 3 and 4.")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("greet", {"name": "Ana María"})]
    forced = model.bind_tools([add, greet], tool_choice="add").invoke("What is 3 + 4?")
    assert forced.tool_calls[0]["args"] == {"a": 3, "b": 4}
    # After the tool's result, the reply is text, unless a call is forced.
    result = ToolMessage("7", tool_call_id=forced.tool_calls[0]["id"], name="add")
    follow_up = [HumanMessage("What is 3 + 4?"), forced, result]
    assert tools.invoke(follow_up).content == "add returned: 7"
    assert model.bind_tools([add], tool_choice="any").invoke(follow_up).tool_calls
    assert not model.bind_tools([add], tool_choice="none").invoke("add 1 and 2").tool_calls


def test_echo_fills_a_schema_within_its_bounds() -> None:
    class Order(BaseModel):
        item: str
        count: int = Field(gt=0, lt=10)
        price: float | None = None
        tags: list[str]
        express: bool

    value = value_for(Order.model_json_schema(), 'Order "tea" x 40 at 2.5')
    assert Order.model_validate(value) == Order(
        item="tea", count=9, price=2.5, tags=["tea"], express=True
    )
    reply = echo_reply([HumanMessage("Sum 1 and 2")], response_format={"type": "json_object"})
    assert reply.content == '{"echo": "Sum 1 and 2"}'
    sums = echo_model().with_structured_output(Sum, method="json_schema").invoke("Sum 1 and 2")
    assert sums == Sum(a=1, b=2)
