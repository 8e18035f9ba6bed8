"""Structured output with repair: ``invoke_structured`` in JSON and native mode.

Canned replies (fenced, partial, invalid, repetitive, empty, cut off at the token limit)
are sent back with the error until one fits or the bounded re-asks run out, then the
failure is data; the same loop under ``ainvoke``; native mode through real client paths
(no thread pool, opaque chains, the OpenAI SDK's own parse); the local server's rewrite
of structured-output requests; and ``usage_of``, the usage counted for each call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from tests.canned_models import (
    PROMPT,
    VALID,
    VALID_JSON,
    AsyncOnly,
    Canned,
    ask,
    reask_text,
    runtime_at,
)
from tests.fake_openai import FakeOpenAI

import aimegraph.models.calls as calls
from aimegraph.models.calls import LLM_RETRY_POLICY, Mode, ainvoke_structured, usage_of
from aimegraph.models.resolve import resolve_model
from aimegraph.state import Usage, Verdict

# --------------------------------------------------------------------------- JSON mode


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(f"```json\n{VALID_JSON}\n```", id="fenced"),
        pytest.param(f"Here is my verdict:\n{VALID_JSON}\nThanks.", id="prose-around"),
        pytest.param(
            "{'passed': True, 'reasoning': 'It answers the goal.', 'issues': [],}",
            id="python-literals-trailing-comma",
        ),
        pytest.param(f"```\n{VALID_JSON}", id="unclosed-fence"),
    ],
)
def test_json_mode_accepts_wrapped_replies_first_time(reply: str) -> None:
    model = Canned(replies=[reply])
    out = ask(model)
    assert out.value == Verdict.model_validate(VALID) and out.error is None
    assert len(model.prompts) == 1 and out.usage.llm_calls == 1
    # The schema is described in the system prompt; nothing else is added.
    system = model.prompts[0][0]
    assert isinstance(system, SystemMessage) and '"passed"' in str(system.content)
    assert len(model.prompts[0]) == len(PROMPT)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        pytest.param('{"passed": true, "reasoning": "It ans', "", id="partial"),
        pytest.param('{"passed": "maybe", "issues": 3}', "does not match the schema", id="schema"),
        pytest.param("I think the answer is fine.", "no JSON", id="no-json"),
        pytest.param("", "empty reply", id="empty"),
        pytest.param("ok " * 60, "repeats itself", id="repetitive-words"),
        pytest.param("}" * 300, "repeats itself", id="repetitive-chars"),
    ],
)
def test_json_mode_sends_a_bad_reply_back_with_the_error(bad: str, said: str) -> None:
    model = Canned(replies=[bad, VALID_JSON])
    out = ask(model)
    assert out.value is not None and out.value.passed
    assert len(model.prompts) == 2
    reask = reask_text(model, 1)
    assert reask.startswith("Your reply could not be used:") and said in reask
    if bad.strip():
        assert bad.strip()[:40] in reask  # the model sees what it sent
    # The re-ask replaces the previous one: the conversation does not grow per retry.
    assert len(model.prompts[1]) == len(PROMPT) + 1
    assert out.usage.llm_calls == 2 and out.usage.by_role["verifier"].llm_calls == 2


def test_json_mode_truncated_at_the_token_limit_is_degenerate() -> None:
    cut = AIMessage(
        content='{"passed": true, "reasoning": "It answers',
        response_metadata={"finish_reason": "length"},
    )
    model = Canned(replies=[cut, VALID_JSON])
    out = ask(model)
    assert out.value is not None
    assert "cut off at the token limit" in reask_text(model, 1)


def test_json_mode_gives_up_after_the_bounded_re_asks_as_data() -> None:
    model = Canned(replies=["the the the the " * 20])
    out = ask(model, retries=2)
    assert out.value is None
    assert out.error is not None and out.error.startswith(
        "no valid Verdict in 3 replies (max_output_retries=2"
    )
    assert "repeats itself" in out.error
    assert len(model.prompts) == 3
    assert out.usage.llm_calls == 3 and out.usage.input_tokens == 300


def test_no_re_ask_when_retries_is_zero() -> None:
    model = Canned(replies=["nope", VALID_JSON])
    out = ask(model, retries=0)
    assert out.value is None and "in 1 replies (max_output_retries=0" in (out.error or "")
    assert len(model.prompts) == 1


# --------------------------------------------------------------------------- native mode


def test_native_mode_uses_the_tool_call() -> None:
    model = Canned(replies=[VALID])
    out = ask(model, mode="native")
    assert out.value == Verdict.model_validate(VALID)
    assert len(model.prompts) == 1 and out.usage.llm_calls == 1
    # No JSON instructions in native mode: the schema travels as a tool.
    assert model.prompts[0] == PROMPT


def test_native_mode_re_asks_on_invalid_arguments() -> None:
    model = Canned(replies=[{"passed": "perhaps", "reasoning": 7}, VALID])
    out = ask(model, mode="native")
    assert out.value is not None and out.value.passed
    reask = reask_text(model, 1)
    assert "does not match the schema" in reask and "perhaps" in reask


def test_native_mode_re_asks_when_the_model_answers_in_prose() -> None:
    model = Canned(replies=["Looks good to me!", VALID])
    out = ask(model, mode="native")
    assert out.value is not None
    assert "no structured output" in reask_text(model, 1)
    assert "Looks good to me!" in reask_text(model, 1)


def test_native_mode_gives_up_as_data() -> None:
    model = Canned(replies=[{"passed": None}])
    out = ask(model, mode="native", retries=1)
    assert out.value is None and (out.error or "").startswith("no valid Verdict in 2 replies")
    assert len(model.prompts) == 2 and out.usage.llm_calls == 2


def test_model_without_tool_calling_fails_as_data_in_native_mode() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage(VALID_JSON)]))
    out = ask(model, mode="native")
    assert out.value is None and (out.error or "").startswith("model call failed")


# --------------------------------------------------------------------------- exceptions


def test_a_permanent_model_error_becomes_data_at_once() -> None:
    model = Canned(replies=[RuntimeError("boom"), VALID_JSON])
    out = ask(model, runtime=runtime_at(1))
    assert out.value is None and out.error == "model call failed: RuntimeError: boom"
    assert len(model.prompts) == 1


def test_a_transient_error_is_re_raised_while_the_node_has_attempts_left() -> None:
    model = Canned(replies=[TimeoutError("slow")])
    with pytest.raises(TimeoutError):
        ask(model, runtime=runtime_at(1))
    with pytest.raises(TimeoutError):
        ask(model, runtime=runtime_at(LLM_RETRY_POLICY.max_attempts - 1))
    # On the last attempt (and outside a graph) it becomes data.
    out = ask(model, runtime=runtime_at(LLM_RETRY_POLICY.max_attempts))
    assert out.value is None and out.error == "model call failed: TimeoutError: slow"
    assert ask(model).error == "model call failed: TimeoutError: slow"


# --------------------------------------------------------------------------- async


@pytest.mark.parametrize(("mode", "bad"), [("json", "no verdict here"), ("native", {"passed": 3})])
async def test_the_same_repair_loop_is_awaited_under_ainvoke(
    mode: Mode, bad: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = LLM_RETRY_POLICY._replace(initial_interval=0.001, max_interval=0.001, jitter=False)
    monkeypatch.setattr(calls, "LLM_RETRY_POLICY", fast)
    # A bad reply is re-asked; the re-ask's transient error is retried in place.
    model = AsyncOnly(
        replies=[bad, ConnectionResetError("reset"), VALID if mode == "native" else VALID_JSON]
    )
    out = await ainvoke_structured(model, Verdict, PROMPT, role="verifier", mode=mode, retries=2)
    assert out.value is not None and out.value.passed, out.error
    assert len(model.prompts) == 3 and out.usage.llm_calls == 2
    assert reask_text(model, 1) == reask_text(model, 2)
    # Its sync API raising is a model failure, as data.
    sync = ask(AsyncOnly(replies=[VALID_JSON]))
    assert (
        sync.model_failed and sync.error == "model call failed: NotImplementedError: async API only"
    )


# --------------------------------------------------------------------------- native mode, real chains


def test_native_structured_output_runs_no_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    # include_raw=True wraps the model in a RunnableParallel (a thread pool per call);
    # the call and the library's parser run one after the other instead.
    from langchain_core.runnables import RunnableParallel

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a RunnableParallel ran")

    monkeypatch.setattr(RunnableParallel, "invoke", refuse)
    model = Canned(replies=[{"passed": "perhaps"}, VALID])
    out = ask(model, mode="native")
    assert out.value == Verdict.model_validate(VALID) and out.usage.llm_calls == 2
    assert out.usage.input_tokens == 200
    assert "does not match the schema" in reask_text(model, 1)


def test_a_model_whose_structured_output_is_not_a_sequence_still_works() -> None:
    class Opaque(Canned):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
            chain = super().with_structured_output(schema, **kwargs)
            return chain if kwargs.get("include_raw") else RunnableLambda(chain.invoke)

    model = Opaque(replies=["no idea", VALID])
    out = ask(model, mode="native")
    assert out.value == Verdict.model_validate(VALID) and out.usage.llm_calls == 2
    assert "no structured output" in reask_text(model, 1)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("not json at all", "Your reply was:\nnot json at all"),
        ('{"passed": "perhaps", "reasoning": "r"}', "passed: Input should be a valid boolean"),
    ],
)
def test_openai_structured_output_that_does_not_fit_is_re_asked(
    fake_openai: FakeOpenAI, bad: str, said: str
) -> None:
    # ChatOpenAI's json_schema method parses the reply inside the call (OpenAI SDK): a
    # reply that does not fit the schema raised there, and used to end as a failed model
    # call with no re-ask.
    fake_openai.script = [(200, bad), (200, VALID_JSON)]
    out = ask(resolve_model("openai:fake", max_retries=0), mode="native")
    assert out.value == Verdict.model_validate(VALID), out.error
    assert fake_openai.requests == 2 and out.usage.llm_calls == 2
    assert out.usage.input_tokens == 50  # the bad reply's tokens are unknown
    assert said in fake_openai.bodies[1]["messages"][-1]["content"]


# --------------------------------------------------------------------------- local server shim


def test_local_server_rewrites_openai_structured_output_requests() -> None:
    from aimegraph.models.local_server import rewrite_chat_request

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = {
        "model": "m",
        "messages": [],
        "max_completion_tokens": 40,
        "response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": schema}},
    }
    out = json.loads(rewrite_chat_request(json.dumps(body).encode()))
    assert out["response_format"] == {"type": "json_object", "schema": schema}
    assert out["max_tokens"] == 40 and "max_completion_tokens" not in out

    plain = json.dumps({"model": "m", "messages": [], "max_tokens": 5}).encode()
    assert rewrite_chat_request(plain) == plain
    assert rewrite_chat_request(b"not json") == b"not json"


# --------------------------------------------------------------------------- usage_of


def test_usage_of_counts_tokens_by_role_and_prices_them() -> None:
    reply = AIMessage(
        "hi",
        usage_metadata={"input_tokens": 1_000, "output_tokens": 200, "total_tokens": 1_200},
        response_metadata={"model_name": "gpt-x"},
    )
    usage = usage_of(reply, "planner", {"gpt-x": (2.0, 10.0), "other": (99.0, 99.0)})
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (1, 1_000, 200)
    assert usage.cost_usd == pytest.approx((1_000 * 2.0 + 200 * 10.0) / 1e6)
    assert usage.by_role["planner"].llm_calls == 1
    assert usage.by_role["planner"].input_tokens == 1_000

    assert usage_of(reply, "actor", {"unknown": (1.0, 1.0)}).cost_usd == 0.0
    assert usage_of(reply, "actor").cost_usd == 0.0
    total = usage_of(reply, "actor") + usage_of(reply, "actor") + usage_of(reply, "reporter")
    assert total.llm_calls == 3 and total.by_role["actor"].llm_calls == 2
    assert total.total_tokens == 3_600


def test_usage_of_a_reply_without_usage_metadata_still_counts_the_call() -> None:
    usage = usage_of(AIMessage("hi"), "verifier")
    assert usage.llm_calls == 1 and usage.by_role["verifier"].llm_calls == 1
    assert usage.total_tokens == 0 and usage.cost_usd == 0.0 and isinstance(usage, Usage)
