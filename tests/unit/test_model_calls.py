"""Calling models: structured output with repair, transient-error retries, usage accounting.

``invoke_structured`` is exercised in both modes with canned replies (fenced, partial,
invalid, repetitive, empty, cut off at the token limit); the retry behaviour of the graph
with models that fail transiently a given number of times (LangGraph ``RetryPolicy`` on
every model-calling node, then failure as data).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest
import tenacity
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import ExecutionInfo, Runtime
from pydantic import Field, PrivateAttr
from tests.conftest import GraphFactory

import aimegraph.graphs.actor
import aimegraph.graphs.aime
import aimegraph.graphs.planner
import aimegraph.graphs.verifier
import aimegraph.models.calls as calls
from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.models.calls import (
    LLM_RETRY_POLICY,
    Mode,
    StructuredReply,
    ainvoke_structured,
    invoke_structured,
    is_transient,
    usage_of,
)
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.resolve import resolve_model
from aimegraph.state import Usage, Verdict

# --------------------------------------------------------------------------- helpers

VALID = {"passed": True, "reasoning": "It answers the goal.", "issues": []}
VALID_JSON = json.dumps(VALID)
PROMPT = [SystemMessage("# Role: verifier\nJudge the answer."), HumanMessage("Goal: g")]


class Canned(BaseChatModel):
    """Replies with the given messages in order (the last repeats); records each prompt.

    A reply is an ``AIMessage``, a string (its text), or an exception (raised). With
    tools bound (native mode) a dict reply becomes a call of the first bound tool.
    """

    replies: list[Any]
    model_name: str = "canned"
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "canned"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return self._prompts

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._prompts.append(list(messages))
        reply = self.replies[min(len(self._prompts), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, dict):
            name = kwargs["tools"][0]["function"]["name"] if kwargs.get("tools") else ""
            reply = AIMessage(
                content="",
                tool_calls=[{"name": name, "args": reply, "id": "c1", "type": "tool_call"}],
            )
        message = AIMessage(content=reply) if isinstance(reply, str) else reply.model_copy()
        message.response_metadata = {"model_name": self.model_name, **message.response_metadata}
        message.usage_metadata = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
        return ChatResult(generations=[ChatGeneration(message=message)])


def ask(
    model: BaseChatModel, mode: Mode = "json", retries: int = 2, **kwargs: Any
) -> StructuredReply[Verdict]:
    return invoke_structured(
        model, Verdict, PROMPT, role="verifier", mode=mode, retries=retries, **kwargs
    )


def reask_text(model: Canned, call: int) -> str:
    """The re-ask turn (the last message) of the ``call``-th prompt."""
    return str(model.prompts[call][-1].content)


def runtime_at(attempt: int) -> Runtime[Any]:
    info = ExecutionInfo(checkpoint_id="c", checkpoint_ns="", task_id="t", node_attempt=attempt)
    return Runtime(execution_info=info)


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


class AsyncOnly(Canned):
    """``Canned`` with an async API only: the sync one raises."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async API only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return Canned._generate(self, messages, stop, **kwargs)


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


# --------------------------------------------------------------------------- is_transient

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _openai_errors() -> list[Any]:
    """openai's exceptions, built with the httpx flavour the installed openai uses."""
    try:
        import httpx2 as transport  # openai >= 3 ships its own httpx fork
    except ImportError:  # pragma: no cover - older openai
        transport = httpx
    request = transport.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    def status(cls: type, code: int) -> Any:
        return cls("x", response=transport.Response(code, request=request), body=None)

    return [
        pytest.param(status(openai.RateLimitError, 429), True, id="rate-limit-429"),
        pytest.param(openai.APITimeoutError(request=request), True, id="timeout"),
        pytest.param(openai.APIConnectionError(request=request), True, id="connection"),
        pytest.param(status(openai.InternalServerError, 500), True, id="server-500"),
        pytest.param(status(openai.BadRequestError, 400), False, id="bad-request-400"),
        pytest.param(status(openai.AuthenticationError, 401), False, id="auth-401"),
        pytest.param(status(openai.NotFoundError, 404), False, id="not-found-404"),
    ]


@pytest.mark.parametrize(("exc", "expected"), _openai_errors())
def test_is_transient_for_openai_errors(exc: BaseException, expected: bool) -> None:
    assert is_transient(exc) is expected


class _Status(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"HTTP {code}")
        self.status_code = code


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        pytest.param(TimeoutError("t"), True, id="TimeoutError"),
        pytest.param(ConnectionResetError("r"), True, id="ConnectionResetError"),
        pytest.param(httpx.ConnectError("refused", request=REQUEST), True, id="httpx.ConnectError"),
        pytest.param(
            httpx.HTTPStatusError(
                "503", request=REQUEST, response=httpx.Response(503, request=REQUEST)
            ),
            True,
            id="httpx-503-response",
        ),
        pytest.param(_Status(500), True, id="500"),
        pytest.param(_Status(502), True, id="502"),
        pytest.param(_Status(429), True, id="429"),
        pytest.param(_Status(408), True, id="408"),
        pytest.param(_Status(400), False, id="400"),
        pytest.param(_Status(422), False, id="422"),
        pytest.param(ValueError("bad"), False, id="ValueError"),
        pytest.param(RuntimeError("boom"), False, id="RuntimeError"),
    ],
)
def test_is_transient(exc: BaseException, expected: bool) -> None:
    assert is_transient(exc) is expected


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("read", request=REQUEST),
        httpx.ConnectTimeout("connect", request=REQUEST),
        httpx.RemoteProtocolError("peer closed", request=REQUEST),
    ],
    ids=["ReadTimeout", "ConnectTimeout", "RemoteProtocolError"],
)
def test_is_transient_for_httpx_transport_errors(exc: BaseException) -> None:
    # Subclasses count too: httpx's timeouts are TimeoutException subclasses whose names
    # do not end in "TimeoutError".
    assert is_transient(exc)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ModelConnectionError("down"), True),
        (ModelTimeoutError("slow"), True),
        (ModelRateLimitError("429"), True),
        (ModelAuthenticationError("401"), False),
        (ModelInvalidRequestError("400"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else None,
)
def test_is_transient_for_langchains_model_errors(exc: BaseException, expected: bool) -> None:
    assert is_transient(exc) is expected


def test_an_anthropic_server_that_cannot_be_reached_is_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.delenv("ANTHROPIC_API_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    model = resolve_model("anthropic:claude-x", timeout=5, max_retries=0)
    with pytest.raises(Exception) as caught:
        model.invoke("hi")
    assert is_transient(caught.value)


def test_the_retry_policy_backs_off_with_jitter_on_transient_errors_only() -> None:
    policy = LLM_RETRY_POLICY
    assert policy.max_attempts >= 2 and policy.backoff_factor > 1 and policy.jitter
    assert policy.initial_interval > 0 and policy.max_interval >= policy.initial_interval
    assert policy.retry_on is is_transient


def test_retrying_runs_with_the_installed_tenacity_and_retries_transient_errors() -> None:
    # Built with the policy's waits (tenacity's own argument names), zeroed to run fast.
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 2:
            raise ConnectionError("reset")
        return "ok"

    runner = calls.retrying(tenacity.Retrying, initial_interval=0.0)
    assert runner(flaky) == "ok" and len(attempts) == 2


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


# --------------------------------------------------------------------------- graph retries

_ROLE = re.compile(r"^#\s*Role:\s*(\w+)", re.MULTILINE)


class Flaky(ScriptedChatModel):
    """The scripted model, but the first ``failures[role]`` calls of a role raise ``error``."""

    failures: dict[str, int] = Field(default_factory=dict)
    error: Any = None
    _failed: dict[str, int] = PrivateAttr(default_factory=dict)
    _flaky_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def failed(self, role: str) -> int:
        return self._failed.get(role, 0)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        first = messages[0].content if messages else ""
        match = _ROLE.search(first if isinstance(first, str) else "")
        role = match.group(1) if match else "reporter"
        with self._flaky_lock:
            if self._failed.get(role, 0) < self.failures.get(role, 0):
                self._failed[role] = self._failed.get(role, 0) + 1
                raise self.error or ConnectionResetError(f"{role}: connection reset by peer")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's retry policy without the waits (same attempts, same classification)."""
    fast = LLM_RETRY_POLICY._replace(initial_interval=0.001, max_interval=0.001, jitter=False)
    for module in (
        calls,
        aimegraph.graphs.planner,
        aimegraph.graphs.actor,
        aimegraph.graphs.verifier,
        aimegraph.graphs.aime,
    ):
        monkeypatch.setattr(module, "LLM_RETRY_POLICY", fast)


def flaky_graph(workspace: Any, failures: dict[str, int], error: Any = None, **config: Any) -> Any:
    model = Flaky(
        scenario=ScriptedChatModel.from_dict(
            {
                "planner": [
                    {"rationale": "r", "tasks": [{"id": "a", "title": "Task a"}], "drop": []}
                ],
                "actors": {
                    "a": [
                        {
                            "tool": "submit_result",
                            "args": {"status": "completed", "summary": "a ok"},
                        }
                    ]
                },
                "reporter": [{"text": "Answer: {all_results}"}],
            }
        ).scenario,
        failures=failures,
        error=error,
    )
    cfg = AimeConfig(workspace=workspace, **config)
    return build_aime_graph(model, config=cfg), model


ATTEMPTS = LLM_RETRY_POLICY.max_attempts


@pytest.mark.parametrize("role", ["planner", "actor", "reporter", "verifier"])
@pytest.mark.parametrize("mode", ["native", "json"])
def test_transient_failures_below_the_attempt_limit_are_retried(
    fast_retries: None, workspace: Any, role: str, mode: str
) -> None:
    graph, model = flaky_graph(workspace, {role: ATTEMPTS - 1}, tool_calling=mode)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert model.failed(role) == ATTEMPTS - 1
    # The node was re-run, not the task: one attempt, one counted call per role.
    assert out["tasks"]["a"].attempts == 1 and out["tasks"]["a"].result.summary == "a ok"
    assert out["usage"].by_role[role].llm_calls == 1
    assert out["final_answer"] == "Answer: a ok"


def test_retries_use_the_real_backoff(workspace: Any) -> None:
    # One retry with the engine's own policy: the wait is between 1 and 2 seconds.
    graph, model = flaky_graph(workspace, {"planner": 1})
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and model.failed("planner") == 1


def test_openai_rate_limits_are_retried(fast_retries: None, workspace: Any) -> None:
    rate_limit = _openai_errors()[0].values[0]
    assert isinstance(rate_limit, openai.RateLimitError)
    graph, model = flaky_graph(workspace, {"actor": ATTEMPTS - 1}, error=rate_limit)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and model.failed("actor") == ATTEMPTS - 1


def test_a_planner_failing_more_often_than_its_attempts_fails_the_run_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, model = flaky_graph(workspace, {"planner": 99}, error=TimeoutError("no answer"))
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert "model call failed: TimeoutError: no answer" in out["reason"]
    assert model.failed("planner") == ATTEMPTS  # one call per node attempt, then data
    assert (
        isinstance(out["final_answer"], str) and "stopped before finishing" in out["final_answer"]
    )


def test_an_actor_failing_more_often_than_its_attempts_fails_the_task_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, model = flaky_graph(workspace, {"actor": 99}, task_retries=1, max_replans=0)
    out = graph.invoke({"goal": "g"})
    task = out["tasks"]["a"]
    assert task.status == "failed" and task.attempts == 2  # the task retry ran too
    assert task.result.summary.startswith("model call failed: ConnectionResetError")
    assert model.failed("actor") == 2 * ATTEMPTS
    assert out["status"] == "budget_exhausted" and "no replans left" in out["reason"]


def test_a_verifier_failing_for_good_fails_the_run_as_data(
    fast_retries: None, workspace: Any
) -> None:
    graph, _ = flaky_graph(workspace, {"verifier": 99})
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "the verifier gave no verdict" in out["reason"]
    assert out["final_answer"] == "Answer: a ok"


def test_a_reporter_failing_for_good_falls_back_to_the_results(
    fast_retries: None, workspace: Any
) -> None:
    graph, _ = flaky_graph(workspace, {"reporter": 99}, verify="off")
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert "a ok" in out["final_answer"] and "reporter model failed" in out["reason"]


def test_a_permanent_error_is_not_retried(fast_retries: None, workspace: Any) -> None:
    graph, model = flaky_graph(workspace, {"planner": 99}, error=_Status(400))
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "HTTP 400" in out["reason"]
    assert model.failed("planner") == 1


def test_scripted_transient_steps_are_retried(
    fast_retries: None, scripted_graph: GraphFactory
) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [
                {"error": "timeout", "message": "read timed out"},
                {"rationale": "r", "tasks": [{"id": "a", "title": "A"}], "drop": []},
            ]
        },
        tool_calling="json",
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["usage"].by_role["planner"].llm_calls == 1


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


# --------------------------------------------------------------------------- a real client


class _FakeOpenAI(ThreadingHTTPServer):
    """A loopback OpenAI-compatible endpoint replying from a script of (status, content)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FakeOpenAIHandler)
        self.script: list[tuple[int, str]] = []
        self.delay_s = 0.0
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _FakeOpenAIHandler(BaseHTTPRequestHandler):
    server: _FakeOpenAI

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        server = self.server
        server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        index = min(server.requests, len(server.script) - 1)
        server.requests += 1
        status, content = server.script[index]
        time.sleep(server.delay_s)
        if status == 200:
            body = {
                "id": f"chatcmpl-{server.requests}",
                "object": "chat.completion",
                "created": 0,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            }
        else:
            body = {"error": {"message": content, "type": "server_error", "code": None}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("retry-after-ms", "1")  # the client's own backoff, made short
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client timed out
            self.wfile.write(data)


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[_FakeOpenAI]:
    server = _FakeOpenAI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_resolved_openai_model_has_a_timeout_and_client_retries(fake_openai: _FakeOpenAI) -> None:
    model = resolve_model("openai:fake")
    # AimeConfig's bounded defaults (model_timeout_s, model_retries).
    assert model.request_timeout == 60 and model.max_retries == 1  # type: ignore[attr-defined]


def test_the_client_retries_rate_limits_and_5xx_itself(fake_openai: _FakeOpenAI) -> None:
    fake_openai.script = [(429, "slow down"), (503, "overloaded"), (200, "hello")]
    reply = resolve_model("openai:fake", max_retries=2).invoke("hi")
    assert reply.text == "hello" and fake_openai.requests == 3
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] == 50


def test_client_errors_are_not_retried_and_not_transient(fake_openai: _FakeOpenAI) -> None:
    fake_openai.script = [(400, "bad request"), (200, "hello")]
    with pytest.raises(openai.BadRequestError) as caught:
        resolve_model("openai:fake", max_retries=3).invoke("hi")
    assert fake_openai.requests == 1 and not is_transient(caught.value)


def test_each_call_has_a_timeout(fake_openai: _FakeOpenAI) -> None:
    fake_openai.script = [(200, "too late")]
    fake_openai.delay_s = 1.0
    with pytest.raises(openai.APITimeoutError) as caught:
        resolve_model("openai:fake", timeout=0.2, max_retries=0).invoke("hi")
    assert is_transient(caught.value)


def test_graph_retries_a_planner_whose_server_keeps_failing(
    fast_retries: None, fake_openai: _FakeOpenAI, scripted_graph: GraphFactory, workspace: Any
) -> None:
    # Client retries off: each 503 reaches the graph, whose RetryPolicy re-runs the node.
    plan_json = json.dumps(
        {"rationale": "r", "tasks": [{"id": "a", "title": "Task a"}], "drop": []}
    )
    fake_openai.script = [(503, "overloaded")] * (ATTEMPTS - 1) + [(200, plan_json)]
    planner = resolve_model("openai:fake", max_retries=0)
    rest = ScriptedChatModel.from_dict({"planner": [{"rationale": "unused", "tasks": []}]})
    cfg = AimeConfig(workspace=workspace, tool_calling="json")
    graph = build_aime_graph(rest, models={"planner": planner}, config=cfg)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert fake_openai.requests == ATTEMPTS
    assert out["usage"].by_role["planner"].llm_calls == 1
    assert out["usage"].by_role["planner"].input_tokens == 50

    # More failures than attempts: the run fails, as data.
    fake_openai.requests = 0
    fake_openai.script = [(503, "overloaded")]
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed" and "503" in out["reason"]
    assert fake_openai.requests == ATTEMPTS


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
    fake_openai: _FakeOpenAI, bad: str, said: str
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


# --------------------------------------------------------------------------- fallback chains


def chain(*members: Canned) -> FallbackChatModel:
    return FallbackChatModel(models=list(members))


@pytest.mark.parametrize("mode", ["native", "json"])
@pytest.mark.parametrize("error", [_Status(429), _Status(500), TimeoutError("slow")])
def test_a_transient_error_falls_through_to_the_next_model(mode: Mode, error: Exception) -> None:
    first = Canned(replies=[error, VALID if mode == "native" else VALID_JSON], model_name="a")
    second = Canned(replies=[VALID if mode == "native" else VALID_JSON], model_name="b")
    out = ask(chain(first, second), mode=mode, runtime=runtime_at(1))
    assert out.value == Verdict.model_validate(VALID), out.error
    assert len(first.prompts) == len(second.prompts) == 1
    assert set(out.usage.by_model) == {"b"} and out.usage.by_model["b"].llm_calls == 1


def test_usage_names_each_model_that_answered() -> None:
    first = Canned(replies=["no verdict here", _Status(503)], model_name="a")
    second = Canned(replies=[VALID_JSON], model_name="b")
    out = ask(chain(first, second), mode="json")
    assert out.value == Verdict.model_validate(VALID)
    assert {name: share.llm_calls for name, share in out.usage.by_model.items()} == {"a": 1, "b": 1}
    assert out.usage.by_role["verifier"].llm_calls == 2


def test_a_permanent_error_does_not_fall_through() -> None:
    first = Canned(replies=[_Status(400)], model_name="a")
    second = Canned(replies=[VALID_JSON], model_name="b")
    out = ask(chain(first, second), runtime=runtime_at(1))
    assert out.model_failed and "HTTP 400" in (out.error or "")
    assert not second.prompts


def test_when_every_model_fails_transiently_the_node_retries() -> None:
    first, second = Canned(replies=[_Status(429)]), Canned(replies=[_Status(502)])
    with pytest.raises(_Status, match="502"):
        ask(chain(first, second), runtime=runtime_at(1))


def test_tools_are_bound_to_each_member() -> None:
    def calculator(expression: str) -> str:
        """Evaluate an expression."""
        return expression

    first = Canned(replies=[_Status(529)], model_name="a")
    second = Canned(replies=[{"expression": "6*7"}], model_name="b")
    reply = chain(first, second).bind_tools([calculator]).invoke(PROMPT)
    assert reply.tool_calls[0]["name"] == "calculator"
    assert reply.tool_calls[0]["args"] == {"expression": "6*7"}
    assert reply.response_metadata["model_name"] == "b"


def test_a_stream_falls_through_before_its_first_chunk() -> None:
    first = Canned(replies=[_Status(500)], model_name="a")
    second = Canned(replies=["streamed"], model_name="b")
    chunks = list(chain(first, second).stream(PROMPT))
    assert "".join(str(c.content) for c in chunks) == "streamed"


async def test_an_awaited_call_falls_through() -> None:
    first = AsyncOnly(replies=[_Status(429)], model_name="a")
    second = AsyncOnly(replies=["async"], model_name="b")
    reply = await chain(first, second).ainvoke(PROMPT)
    assert reply.text == "async" and reply.response_metadata["model_name"] == "b"
    chunks = [c async for c in chain(AsyncOnly(replies=[_Status(500)]), second).astream(PROMPT)]
    assert "".join(str(c.content) for c in chunks) == "async"
