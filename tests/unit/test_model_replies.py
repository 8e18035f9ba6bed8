"""Reading model replies: reasoning left out, tool calls written as text found."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from aimegraph.models.json_tools import parse_tool_calls, tool_calls_in_text
from aimegraph.models.jsonparse import JsonReplyError
from aimegraph.models.reasoning import strip_reasoning, visible_text, without_think_text

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
