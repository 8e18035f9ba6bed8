"""Tolerant JSON parsing of model replies and detection of degenerate replies.

The repairs themselves are json-repair's; these tests pin what the engine relies on:
which value of a reply is the answer, and which replies are refused (cut off, or
holding bare words a repair would have to guess about)."""

from __future__ import annotations

import json

import pytest

from aimegraph.models.jsonparse import (
    JsonReplyError,
    check_degenerate,
    json_values,
    parse_json_reply,
)

# --------------------------------------------------------------------------- parse_json_reply


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param('{"a": 1}', {"a": 1}, id="plain"),
        pytest.param('  \n{"a": 1}\n ', {"a": 1}, id="surrounding-whitespace"),
        pytest.param('```json\n{"a": 1, "b": "x"}\n```', {"a": 1, "b": "x"}, id="fenced-json"),
        pytest.param('```\n{"a": 1}\n```', {"a": 1}, id="fenced-no-info-string"),
        pytest.param('```JSON\n{"a": 1}', {"a": 1}, id="fence-never-closed"),
        pytest.param(
            'Here is the plan:\n```json\n{"a": [1, 2]}\n```\nLet me know!',
            {"a": [1, 2]},
            id="fenced-with-prose",
        ),
        pytest.param(
            'Sure! The answer is {"answer": 42, "ok": true}. Hope that helps.',
            {"answer": 42, "ok": True},
            id="prose-wrapped",
        ),
        pytest.param(
            "Here's my reply: {'name': 'calc', 'args': {'x': 'it\\'s'}}",
            {"name": "calc", "args": {"x": "it's"}},
            id="single-quotes",
        ),
        pytest.param(
            "{'passed': True, 'issues': [], 'note': None}",
            {"passed": True, "issues": [], "note": None},
            id="python-literals",
        ),
        pytest.param(
            "{'passed': true, 'reasoning': null, 'n': 1e3}",
            {"passed": True, "reasoning": None, "n": 1000.0},
            id="single-quotes-with-json-words",
        ),
        pytest.param(
            '{"a": [1, 2, 3,], "b": {"c": 1,},}',
            {"a": [1, 2, 3], "b": {"c": 1}},
            id="trailing-commas",
        ),
        pytest.param(
            '{"text": "a, }", "list": ["x,]",],}',
            {"text": "a, }", "list": ["x,]"]},
            id="trailing-commas-not-inside-strings",
        ),
        pytest.param('{"a": 1}\n{"b": 2}', {"a": 1}, id="two-objects-first-wins"),
        pytest.param('{"a": 1} and then {"b": 2', {"a": 1}, id="complete-first-then-truncated"),
        pytest.param(
            'Use the form {name} like this: {"name": "x"}',
            {"name": "x"},
            id="skips-braces-in-prose",
        ),
        pytest.param(
            '{"tasks": [{"id": "a", "deps": [[1, 2], [3, [4]]]}, {"id": "b", "deps": []}]}',
            {"tasks": [{"id": "a", "deps": [[1, 2], [3, [4]]]}, {"id": "b", "deps": []}]},
            id="nested-arrays",
        ),
        pytest.param(
            '{"s": "braces } ] { [ and \\"quotes\\" inside"}',
            {"s": 'braces } ] { [ and "quotes" inside'},
            id="brackets-inside-strings",
        ),
        pytest.param("The list: [1, 2, 3,]", [1, 2, 3], id="array-when-no-object"),
        pytest.param('"just a string"', "just a string", id="whole-reply-scalar"),
        pytest.param('{"msg": "caf\\u00e9 \\n ok"}', {"msg": "café \n ok"}, id="escapes"),
    ],
)
def test_parse_json_reply_accepts(reply: str, expected: object) -> None:
    assert parse_json_reply(reply) == expected


# Shapes real models produce that the hand-written parser this module replaced refused.
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            "{tool: 'calculator', args: {expression: '6*7'}}",
            {"tool": "calculator", "args": {"expression": "6*7"}},
            id="unquoted-keys",
        ),
        pytest.param("{x: 1}", {"x": 1}, id="bare-key"),
        pytest.param(
            '{\n  // the plan\n  "a": 1, /* why */ "b": [1, 2]  # two\n}',
            {"a": 1, "b": [1, 2]},
            id="comments",
        ),
        pytest.param(
            '{"path": "a.py", "content": "def f():\n    return 1\n"}',
            {"path": "a.py", "content": "def f():\n    return 1\n"},
            id="raw-line-breaks-in-a-string",
        ),
        pytest.param('{"a": 1 "b": 2}', {"a": 1, "b": 2}, id="missing-comma"),
        pytest.param(
            "{'path': 'a.txt', 'content': 'last line\\n'}",
            {"path": "a.txt", "content": "last line\n"},
            id="repaired-string-keeps-its-final-newline",
        ),
        pytest.param(
            '<think>I could reply {"passed": false}. No.</think>\n{"passed": true}',
            {"passed": True},
            id="json-in-a-think-block-is-ignored",
        ),
        pytest.param(
            'The user wants {"a": 1}</think>{"a": 2}',
            {"a": 2},
            id="reasoning-whose-opening-tag-was-in-the-prompt",
        ),
    ],
)
def test_real_model_shapes(reply: str, expected: object) -> None:
    assert parse_json_reply(reply) == expected


def test_the_preferred_object_wins_even_when_it_comes_second() -> None:
    reply = (
        'The format is {"tool": "<tool name>", "args": {...}}. So my call is:\n'
        '```json\n{"tool": "calculator", "args": {"expression": "6*7"}}\n```'
    )

    def names_a_tool(value: object) -> bool:
        return isinstance(value, dict) and value.get("tool") == "calculator"

    assert parse_json_reply(reply, prefer=names_a_tool) == {
        "tool": "calculator",
        "args": {"expression": "6*7"},
    }
    # Without a preference the first complete object is the answer.
    assert parse_json_reply('{"a": 1} {"b": 2}', prefer=lambda v: "b" in v) == {"b": 2}
    assert parse_json_reply('{"a": 1} {"b": 2}', prefer=lambda v: "c" in v) == {"a": 1}


def test_a_cut_off_value_is_refused_when_nothing_else_is_preferred() -> None:
    # An object that may be a draft comes first; the answer was cut off at the token limit.
    reply = '{"draft": true}\n{"tool": "write_file", "args": {"content": "def f():\n    return {'
    with pytest.raises(JsonReplyError, match="unterminated string"):
        parse_json_reply(reply, prefer=lambda v: "tool" in v)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            '{"tool": "write_file", "args": {"path": "a.py", "content": "x = {\'a\': [1, 2',
            id="cut-inside-a-string-holding-brackets",
        ),
        pytest.param('```json\n{"summary": "the user\'s file has 3', id="apostrophe-in-the-string"),
        pytest.param("{'summary': 'the result is", id="single-quoted"),
    ],
)
def test_unterminated_strings_at_the_token_limit_are_refused(reply: str) -> None:
    # json-repair alone would close the string and return a truncated file or summary.
    with pytest.raises(JsonReplyError, match="unterminated string: the reply seems truncated"):
        parse_json_reply(reply)


def test_a_reply_that_is_all_reasoning_is_empty() -> None:
    with pytest.raises(JsonReplyError, match="empty reply"):
        parse_json_reply('<think>The plan could be {"tasks": []} but I am not sure')
    assert check_degenerate("<think>hmm</think>") == "empty reply: only reasoning, no answer"
    assert check_degenerate('<think>hmm</think>{"a": 1}') is None


def test_json_values_lists_every_parsed_value() -> None:
    reply = 'First {"a": 1}, then [2, 3], broken {"b": oops}, <think>{"c": 4}</think> {"d": 5}'
    assert json_values(reply) == [{"a": 1}, [2, 3], {"d": 5}]
    assert json_values('"a string"') == []
    assert json_values('[{"a": 1}]') == [[{"a": 1}]]


def test_object_preferred_over_bracketed_prose() -> None:
    assert parse_json_reply('Step [1]: {"done": false}') == {"done": False}


def test_broken_object_does_not_yield_its_nested_object() -> None:
    with pytest.raises(JsonReplyError, match="invalid JSON"):
        parse_json_reply('{"tasks": [{"id": "a"}], oops}')


def test_python_fallback_only_yields_json_data() -> None:
    with pytest.raises(JsonReplyError, match="invalid JSON"):
        parse_json_reply("{'a': {1, 2}}")  # a Python set


def test_never_evaluates_code() -> None:
    with pytest.raises(JsonReplyError):
        parse_json_reply("{'a': __import__('os').getcwd()}")


def test_round_trip_large_pretty_object() -> None:
    value = {
        "tasks": [{"id": f"t{i}", "dependencies": [f"t{i - 1}"] if i else []} for i in range(50)]
    }
    reply = "Plan:\n```json\n" + json.dumps(value, indent=2) + "\n```"
    assert parse_json_reply(reply) == value


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        pytest.param("", "empty reply: expected a JSON object", id="empty"),
        pytest.param(" \n\t ", "empty reply: expected a JSON object", id="whitespace"),
        pytest.param("I cannot help with that.", "no JSON object found in the reply", id="prose"),
        pytest.param("```python\nprint(1)\n```", "no JSON object found in the reply", id="code"),
        pytest.param(
            '{"tasks": [{"id": "a"',
            "unterminated object: the reply seems truncated (missing '}]}' at the end)",
            id="truncated-object",
        ),
        pytest.param(
            '```json\n{"a": 1,\n',
            "unterminated object: the reply seems truncated (missing '}' at the end)",
            id="truncated-in-fence",
        ),
        pytest.param(
            "[1, 2",
            "unterminated array: the reply seems truncated (missing ']' at the end)",
            id="truncated-array",
        ),
        pytest.param(
            '{"summary": "the result is',
            "unterminated string: the reply seems truncated",
            id="truncated-string",
        ),
        pytest.param(
            'Format: {x}. Answer: {"a": [1',
            "unterminated object: the reply seems truncated (missing ']}' at the end)",
            id="truncation-wins-over-earlier-noise",
        ),
        pytest.param(
            '{"a" 1}',
            "invalid JSON: Expecting ':' delimiter (line 1, column 6)",
            id="missing-colon",
        ),
        pytest.param(
            '{"status": done}',
            "invalid JSON: Expecting value (line 1, column 12)",
            id="bare-word-value",
        ),
    ],
)
def test_parse_json_reply_errors(reply: str, message: str) -> None:
    with pytest.raises(JsonReplyError) as info:
        parse_json_reply(reply)
    assert str(info.value) == message


def test_error_is_a_value_error() -> None:
    assert issubclass(JsonReplyError, ValueError)
    with pytest.raises(ValueError):
        parse_json_reply("nothing")


def test_non_text_reply() -> None:
    with pytest.raises(JsonReplyError, match="expected the reply as text"):
        parse_json_reply(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- check_degenerate


@pytest.mark.parametrize(
    "reply",
    [
        '{"a": 1}',
        "The answer is 42.",
        "very very good",
        "=" * 80,
        "I am stuck. " * 3,
        json.dumps(
            {
                "tasks": [
                    {"id": f"t{i}", "title": "same", "deps": [], "persona": None} for i in range(30)
                ]
            },
            indent=2,
        ),
        "\n".join(f"- [ ] step {i}: do the thing" for i in range(40)),
    ],
)
def test_usable_replies_are_not_degenerate(reply: str) -> None:
    assert check_degenerate(reply) is None
    assert check_degenerate(reply, finish_reason="stop") is None


@pytest.mark.parametrize("reply", ["", "   ", "\n\n\t"])
def test_empty_reply(reply: str) -> None:
    assert check_degenerate(reply) == "empty reply"


def test_truncated_at_token_limit() -> None:
    reason = check_degenerate('{"a": 1', finish_reason="length")
    assert reason == "the reply was cut off at the token limit (it seems truncated)"


@pytest.mark.parametrize(
    ("reply", "unit", "times"),
    [
        pytest.param("the " * 30, "the", 30, id="same-word"),
        pytest.param("Answer: " + "I am stuck. " * 10, "I am stuck.", 10, id="same-sentence"),
        pytest.param(
            "Plan:\n" + "Step: check the file.\nThen: read it.\n" * 6,
            "Step: check the file. Then: read it.",
            6,
            id="same-lines",
        ),
        pytest.param("ok " + "!" * 300, "!", 300, id="same-character"),
        pytest.param("abc" * 100, "abc", 100, id="no-spaces"),
    ],
)
def test_repetition(reply: str, unit: str, times: int) -> None:
    assert check_degenerate(reply) == f"the reply repeats itself: {unit!r} repeated {times} times"


def test_repetition_is_reported_before_truncation() -> None:
    reason = check_degenerate("go on " * 40, finish_reason="length")
    assert reason is not None and reason.startswith("the reply repeats itself")


def test_long_unit_is_shortened() -> None:
    sentence = "this is a rather long sentence that keeps coming back again and again. "
    reason = check_degenerate(sentence * 5)
    assert reason == (
        "the reply repeats itself: 'this is a rather long sentence that k...' repeated 5 times"
    )
