"""Which model errors are transient, and the retries that act on them.

``is_transient`` over openai's, httpx's, LangChain's and plain exceptions and status
codes; the node ``RetryPolicy`` (backoff with jitter, tenacity); and the real OpenAI
client against a loopback server: its own retries of rate limits and 5xx, no retry of
client errors, a timeout on every call.
"""

from __future__ import annotations

import socket

import httpx
import openai
import pytest
import tenacity
from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from tests.canned_models import StatusError, openai_errors
from tests.fake_openai import FakeOpenAI

import aimegraph.models.calls as calls
from aimegraph.models.calls import LLM_RETRY_POLICY, is_transient
from aimegraph.models.resolve import resolve_model

# --------------------------------------------------------------------------- is_transient

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


@pytest.mark.parametrize(("exc", "expected"), openai_errors())
def test_is_transient_for_openai_errors(exc: BaseException, expected: bool) -> None:
    assert is_transient(exc) is expected


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
        pytest.param(StatusError(500), True, id="500"),
        pytest.param(StatusError(502), True, id="502"),
        pytest.param(StatusError(429), True, id="429"),
        pytest.param(StatusError(408), True, id="408"),
        pytest.param(StatusError(400), False, id="400"),
        pytest.param(StatusError(422), False, id="422"),
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


# --------------------------------------------------------------------------- a real client


def test_resolved_openai_model_has_a_timeout_and_client_retries(fake_openai: FakeOpenAI) -> None:
    model = resolve_model("openai:fake")
    # AimeConfig's bounded defaults (model_timeout_s, model_retries).
    assert model.request_timeout == 60 and model.max_retries == 1  # type: ignore[attr-defined]


def test_the_client_retries_rate_limits_and_5xx_itself(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [(429, "slow down"), (503, "overloaded"), (200, "hello")]
    reply = resolve_model("openai:fake", max_retries=2).invoke("hi")
    assert reply.text == "hello" and fake_openai.requests == 3
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] == 50


def test_client_errors_are_not_retried_and_not_transient(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [(400, "bad request"), (200, "hello")]
    with pytest.raises(openai.BadRequestError) as caught:
        resolve_model("openai:fake", max_retries=3).invoke("hi")
    assert fake_openai.requests == 1 and not is_transient(caught.value)


def test_each_call_has_a_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [(200, "too late")]
    fake_openai.delay_s = 1.0
    with pytest.raises(openai.APITimeoutError) as caught:
        resolve_model("openai:fake", timeout=0.2, max_retries=0).invoke("hi")
    assert is_transient(caught.value)
