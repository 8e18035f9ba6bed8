"""Tool calling in aimegraph's JSON mode for the ReAct baselines.

A model without native tool calling (``tool_calling="auto"`` picks the JSON mode for
it) is given its tools by aimegraph's actors in the prompt, and answers with a JSON
call (:mod:`aimegraph.models.json_tools`). A baseline handed the bare model would run
with no tools at all (``create_agent`` binds them natively, and such a model ignores
them or refuses), and the comparison would mean nothing. :class:`JsonToolCalling`
wraps the model so that ``create_agent`` (and deepagents) get the same JSON mode:

- ``bind_tools`` keeps the tools; each call describes them in the system prompt with
  aimegraph's instructions (:data:`aimegraph.prompts.json_mode.TOOLS`), sends the
  conversation as plain turns, and, for a model that decodes a forced call under a
  grammar (llama.cpp), forces one call of one of them (:func:`json_step_model`);
- the reply's JSON call becomes a native tool call the loop runs; a call of
  :data:`FINAL_ANSWER` (offered unless the loop forces a tool) or a reply that calls
  no bound tool is the final answer, as a text reply ends a ReAct loop.

The inner call is not reported to the run's callbacks: the reply carries its usage and
model name, so the usage counter counts one call, as for any model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import BaseModel, Field

from aimegraph.models.calls import with_json_instructions
from aimegraph.models.json_tools import (
    describe_tools,
    json_step_model,
    plain_conversation,
    tool_calls_in_text,
)
from aimegraph.models.reasoning import visible_text
from aimegraph.prompts import json_mode

__all__ = ["FINAL_ANSWER", "JsonToolCalling"]


class _FinalAnswerArgs(BaseModel):
    answer: str = Field(description="The complete final answer to the user's request.")


def _final_answer(answer: str) -> str:
    return answer


FINAL_ANSWER = StructuredTool.from_function(
    _final_answer,
    name="final_answer",
    description="Give the final answer to the user's request; call it once you are done.",
    args_schema=_FinalAnswerArgs,
)
"""How a JSON-mode baseline ends: its call is the answer (never run as a tool)."""

_FORCING = ("any", "required")


def _as_tool(item: Any) -> BaseTool:
    if isinstance(item, BaseTool):
        return item
    if callable(item):
        return tool(item)
    raise TypeError(f"JSON-mode tool calling describes LangChain tools; got {item!r:.80}")


class JsonToolCalling(BaseChatModel):
    """``inner`` with aimegraph's JSON-mode tool calling (see the module docstring)."""

    inner: BaseChatModel
    tools: tuple[BaseTool, ...] = ()
    forced: bool = False
    """The loop asks for a tool call (``tool_choice`` any): no final answer offered."""

    @property
    def _llm_type(self) -> str:
        return "aimegraph-json-tool-calling"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        forced = tool_choice in _FORCING or isinstance(tool_choice, dict)
        copy = self.model_copy(update={"tools": tuple(map(_as_tool, tools)), "forced": forced})
        return copy.bind(**kwargs) if kwargs else copy

    def _offered(self) -> list[BaseTool]:
        return [*self.tools] if self.forced else [*self.tools, FINAL_ANSWER]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        offered = self._offered()
        instructions = json_mode.TOOLS.format(tools=describe_tools(offered))
        prompt = plain_conversation(with_json_instructions(messages, instructions))
        # No callbacks: this call is reported once, as this model's reply.
        reply = json_step_model(self.inner, offered).invoke(
            prompt, {"callbacks": []}, stop=stop, **kwargs
        )
        return ChatResult(generations=[ChatGeneration(message=self._read(reply))])

    def _read(self, reply: AIMessage) -> AIMessage:
        """The reply as the loop takes it: calls of bound tools, else the answer."""
        names = [t.name for t in self._offered()]
        text = visible_text(reply)  # a draft call in <think> text is not the call
        calls = tool_calls_in_text(text, names)
        answers = [c for c in calls if c["name"] == FINAL_ANSWER.name]
        calls = [c for c in calls if c["name"] != FINAL_ANSWER.name]
        if calls:
            content = ""
        elif answers:
            content = str(answers[0]["args"].get("answer", ""))
        else:
            content = text
        return AIMessage(
            content=content,
            tool_calls=calls,
            id=reply.id,
            usage_metadata=reply.usage_metadata,
            response_metadata=reply.response_metadata,
        )
