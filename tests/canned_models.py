"""Chat-model doubles, canned replies and provider errors shared by the model-call tests.

``Canned`` replies with a list of messages (or raises), ``ask`` runs ``invoke_structured``
for a ``Verdict`` against it; ``StatusError`` and ``openai_errors`` are the errors the retry
classification sees from providers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import openai
import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import ExecutionInfo, Runtime
from pydantic import PrivateAttr

from aimegraph.models.calls import Mode, StructuredReply, invoke_structured
from aimegraph.state import Verdict

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


class StatusError(Exception):
    """An error carrying an HTTP status code, the way provider SDKs raise them."""

    def __init__(self, code: int) -> None:
        super().__init__(f"HTTP {code}")
        self.status_code = code


def openai_errors() -> list[Any]:
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
