"""Reading model replies: reasoning left out, tool calls written as text found, and
why a reply whose tool-call arguments do not parse could not be used."""

from __future__ import annotations

import json

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage

from aimegraph import PlanUpdate
from aimegraph.models.json_tools import parse_tool_calls, tool_calls_in_text
from aimegraph.models.jsonparse import JsonReplyError
from aimegraph.models.reasoning import strip_reasoning, visible_text, without_think_text
from aimegraph.models.reply_reading import read_reply
from aimegraph.nodes.replies import RE_ASK, reply_messages

BOUND = ("calculator", "submit_result")


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<think>a {b}</think>\nAnswer", "Answer"),
        ("<THINK>a</THINK>x<think>b</think>y", "xy"),
        ("the opening tag was in the prompt</think> Answer", "Answer"),
        ("<think>cut off while thinking", ""),
        ("Answer <think>and then cut off", "Answer"),
        ("no reasoning at all", "no reasoning at all"),
    ],
)
def test_strip_reasoning(text: str, visible: str) -> None:
    assert strip_reasoning(text) == visible


def test_reasoning_blocks_are_not_visible_but_kept_in_the_message() -> None:
    message = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "secret"},
            {"type": "text", "text": "<think>more</think>Shown"},
        ]
    )
    assert visible_text(message) == "Shown"
    cleaned = without_think_text(message)
    # Providers need reasoning blocks back while a tool-using turn continues.
    assert cleaned.content == [
        {"type": "reasoning", "reasoning": "secret"},
        {"type": "text", "text": "Shown"},
    ]
    plain = AIMessage(content="nothing to strip")
    assert without_think_text(plain) is plain


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculator", "arguments": {"expression": "1+1"}}',
        'Let me: ```json\n{"tool": "calculator", "args": {"expression": "1+1"}}\n``` ok?',
        '{"function": "calculator", "parameters": {"expression": "1+1"}, "id": "c1"}',
        json.dumps(
            {
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'},
            }
        ),
        '{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}',
    ],
)
def test_tool_calls_in_text_shapes(text: str) -> None:
    (call,) = tool_calls_in_text(text, BOUND)
    assert (call["name"], call["args"], call["type"]) == (
        "calculator",
        {"expression": "1+1"},
        "tool_call",
    )
    assert call["id"]


def test_tool_calls_in_text_takes_lists_and_leaves_data_alone() -> None:
    listed = json.dumps(
        [
            {"name": "calculator", "arguments": {"expression": "2"}},
            {"name": "submit_result", "arguments": {"status": "completed", "summary": "s"}},
        ]
    )
    assert [c["name"] for c in tool_calls_in_text(listed, BOUND)] == list(BOUND)
    for text in [
        '{"name": "calculator", "version": 2}',  # data that happens to name a tool
        '{"name": "web_search", "arguments": {"q": "x"}}',  # a tool that is not bound
        '[{"name": "calculator", "arguments": {}}, {"total": 3}]',  # calls mixed with data
        '{"name": "calculator", "arguments": 5}',  # arguments that are not an object
        "The answer is 42.",
    ]:
        assert tool_calls_in_text(text, BOUND) == [], text


def test_parse_tool_calls_prefers_the_call_of_a_bound_tool() -> None:
    reply = (
        'Format: {"tool": "<tool name>", "args": {}}\n'
        'Call: {"tool": "calculator", "args": {"expression": "3"}}'
    )
    (call,) = parse_tool_calls(reply, BOUND)
    assert call["args"] == {"expression": "3"}
    # Without bound names the first object is taken; an unknown tool is let through for
    # the tool node to answer with the tools the model has.
    assert parse_tool_calls(reply)[0]["name"] == "<tool name>"
    with pytest.raises(JsonReplyError, match='no "tool" name'):
        parse_tool_calls('{"args": {}}', BOUND)


LOOPING_ARGS = '{"tasks": [{"id": "a", "title": "' + "the same words again " * 40
CUT_OFF_ARGS = '{"tasks": [{"id": "a", "title": "Multiply 17 by'


def _invalid_call(args: str, name: str, **metadata: str) -> AIMessage:
    bad = {"name": name, "args": args, "id": "c1", "error": "not JSON"}
    return AIMessage(
        content="",
        invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}],
        response_metadata=metadata,
    )


@pytest.mark.parametrize(
    ("args", "metadata", "said"),
    [
        (LOOPING_ARGS, {}, "the reply repeats itself"),
        (CUT_OFF_ARGS, {"finish_reason": "length"}, "the reply was cut off at the token limit"),
        (CUT_OFF_ARGS, {}, "Function PlanUpdate arguments"),
    ],
)
def test_a_structured_reply_whose_arguments_do_not_parse_says_why(
    args: str, metadata: dict[str, str], said: str
) -> None:
    # A small model looping inside a string until the token limit leaves arguments that
    # do not parse: the re-ask says it looped (asking for a short reply), not only that
    # the JSON is broken.
    raw = _invalid_call(args, "PlanUpdate", **metadata)
    error = OutputParserException(f"Function PlanUpdate arguments:\n\n{args}\n\nare not valid JSON")
    reply = {"raw": raw, "parsed": None, "parsing_error": error}
    value, _, problem, _ = read_reply(reply, PlanUpdate, "native")
    assert value is None and problem is not None and problem.startswith(said)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (LOOPING_ARGS, "the reply repeats itself"),
        (CUT_OFF_ARGS, "the arguments of your calculator call were not valid JSON"),
    ],
)
def test_an_actor_call_whose_arguments_do_not_parse_is_asked_again_saying_why(
    args: str, said: str
) -> None:
    *_, re_ask = reply_messages(_invalid_call(args, "calculator"), list(BOUND), "native")
    assert isinstance(re_ask, HumanMessage)
    assert re_ask.response_metadata[RE_ASK].startswith(said)
