"""Actor replies shaped like those of real models (issue 10, items 4-6): empty replies,
tool calls written into the content, reasoning in what is shown and stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from tests.conftest import GraphFactory
from tests.scripted import plan, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.models.offline.fuzz import FuzzChatModel, FuzzRates

COMPUTE = {"id": "a", "title": "Multiply", "tool_bundles": ["compute"]}


def actor_prompts(model: ScriptedChatModel) -> list[str]:
    return model.prompts("actor")


# --------------------------------------------------------------------------- item 4


def test_an_empty_native_reply_is_asked_again(workspace: Path) -> None:
    inner = ScriptedChatModel.from_dict(
        {
            "planner": [plan(COMPUTE)],
            "actors": {
                "a": [
                    {"tool": "calculator", "args": {"expression": "6*7"}},
                    submit("product {last_tool_output}"),
                ]
            },
        }
    )
    # Every first answer to a conversation is empty; the re-ask of one is answered.
    model = FuzzChatModel(
        inner=inner,
        rates=FuzzRates(**{name: 0.0 for name in FuzzRates.model_fields} | {"empty": 1.0}),
    )
    out = build_aime_graph(model, config=AimeConfig(workspace=workspace)).invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["a"].result.summary == "product 42"
    assert out["usage"].by_role["actor"].llm_calls == 4  # two steps, each asked twice
    # Each step's empty reply was answered with a re-ask, and the model saw both.
    assert actor_prompts(inner)[-1].count("could not be used: empty reply") == 2


def test_a_model_that_stays_silent_fails_saying_so(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {"planner": [plan(COMPUTE)], "actors": {"a": [{"raw": ""}] * 5}},
        max_actor_steps=3,
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    summary = out["tasks"]["a"].result.summary
    assert out["tasks"]["a"].status == "failed"
    assert "Stopped after 3 steps" in summary
    assert "the model's last reply could not be used: empty reply" in summary
    assert len(actor_prompts(model)) == 3


# --------------------------------------------------------------------------- item 5

CALL_IN_TEXT = [
    pytest.param(
        '```json\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n```',
        id="fenced-name-arguments",
    ),
    pytest.param(
        'I will compute it: {"tool": "calculator", "args": {"expression": "6*7"}} and then report.',
        id="tool-args-in-prose",
    ),
    pytest.param(
        '{"function": "calculator", "parameters": {"expression": "6*7"}}',
        id="function-parameters",
    ),
    pytest.param(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "calculator",
                        "arguments": json.dumps({"expression": "6*7"}),
                    },
                }
            ]
        ),
        id="openai-list-with-string-arguments",
    ),
    pytest.param(
        '<think>Maybe {"name": "submit_result", "arguments": {"status": "failed", '
        '"summary": "give up"}}? No.</think>\n{"name": "calculator", "arguments": '
        '{"expression": "6*7"}}',
        id="after-a-think-block-holding-another-call",
    ),
]


@pytest.mark.parametrize("reply", CALL_IN_TEXT)
@pytest.mark.parametrize("mode", ["native", "json"])
def test_a_tool_call_written_in_the_content_is_executed(
    scripted_graph: GraphFactory, reply: str, mode: str
) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(COMPUTE)],
            "actors": {"a": [{"raw": reply}, submit("product {last_tool_output}")]},
        },
        tool_calling=mode,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["a"].result.summary == "product 42"
    assert out["usage"].tool_calls == 1  # the calculator (submit_result is a report)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            'The totals are {"north": 5, "south": 7}, from {"name": "calculator", "version": 2}.',
            id="json-data-naming-a-tool",
        ),
        pytest.param(
            'Done: {"name": "write_file", "arguments": {"path": "x", "content": "y"}}',
            id="call-of-a-tool-not-bound",
        ),
    ],
)
def test_an_answer_that_merely_contains_json_is_the_summary(
    scripted_graph: GraphFactory, reply: str
) -> None:
    graph, _ = scripted_graph({"planner": [plan(COMPUTE)], "actors": {"a": [{"raw": reply}]}})
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == reply
    assert out["usage"].tool_calls == 0


# --------------------------------------------------------------------------- item 6


@pytest.mark.parametrize("mode", ["native", "json"])
def test_reasoning_never_reaches_summaries_answers_or_messages(
    scripted_graph: GraphFactory, mode: str
) -> None:
    draft = '{"tool": "submit_result", "args": {"status": "failed", "summary": "draft"}}'
    final = (
        '{"tool": "submit_result", "args": {"status": "completed", "summary": "b is 17"}}'
        if mode == "json"
        else "b is 17"
    )
    graph, _ = scripted_graph(
        {
            "planner": [plan({"id": "b", "title": "Count"})],
            "actors": {"b": [{"raw": f"<think>First try: {draft}</think>\n{final}"}]},
            "reporter": [{"text": "The user wants b.</think>\nAnswer: {result:b}"}],
        },
        tool_calling=mode,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["b"].result.summary == "b is 17"
    assert out["final_answer"] == "Answer: b is 17"
    assert out["messages"][-1].content == "Answer: b is 17"


def test_a_reply_cut_off_while_thinking_is_asked_again(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(COMPUTE)],
            "actors": {"a": [{"raw": '<think>I should call {"name": "calculator", "argu'}] * 3},
        },
        max_actor_steps=2,
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    summary = out["tasks"]["a"].result.summary
    assert out["tasks"]["a"].status == "failed"
    assert "could not be used: empty reply: only reasoning, no answer" in summary
    assert "<think>" not in summary


@pytest.mark.parametrize("mode", ["native", "json"])
def test_think_text_is_not_sent_back_to_the_model(scripted_graph: GraphFactory, mode: str) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(COMPUTE)],
            "actors": {
                "a": [
                    {
                        "raw": '<think>hmm</think>{"tool": "calculator", "args": {"expression": "2"}}'
                    },
                    submit("ok"),
                ]
            },
        },
        tool_calling=mode,
    )
    assert graph.invoke({"goal": "g"})["status"] == "succeeded"
    second = actor_prompts(model)[1]
    assert '"calculator"' in second and "hmm" not in second


class BrokenArgumentsFirst(ScriptedChatModel):
    """The scripted model, except that an actor's first reply is a tool call whose
    arguments are not valid JSON (cut off), with a little text around it."""

    def _generate(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        first_actor_reply = "# Role: actor" in messages[0].text and not any(
            isinstance(m, AIMessage) for m in messages
        )
        if not first_actor_reply:
            return super()._generate(messages, stop, run_manager, **kw)
        broken = AIMessage(
            content="Computing it now.",
            invalid_tool_calls=[
                {
                    "name": "calculator",
                    "args": '{"expression": "6*',
                    "id": "call_1",
                    "error": "Unterminated string",
                    "type": "invalid_tool_call",
                }
            ],
        )
        return ChatResult(generations=[ChatGeneration(message=broken)])


def test_a_call_with_broken_arguments_is_asked_again_not_taken_as_the_answer(
    workspace: Path,
) -> None:
    model = BrokenArgumentsFirst.from_dict(
        {
            "planner": [plan(COMPUTE)],
            "actors": {
                "a": [
                    {"text": "(replaced by the broken call)"},
                    {"tool": "calculator", "args": {"expression": "6*7"}},
                    submit("product {last_tool_output}"),
                ]
            },
        }
    )
    out = build_aime_graph(model, config=AimeConfig(workspace=workspace)).invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "product 42"
    second = actor_prompts(model)[1]
    assert "Computing it now." in second
    assert "the arguments of your calculator call were not valid JSON" in second
