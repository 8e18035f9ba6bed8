"""A chat model that reshapes another model's replies the way real models bend them.

:class:`FuzzChatModel` wraps any ``BaseChatModel`` (the scripted model in the test
suite) and, seeded and at configurable rates, turns its good replies into the shapes
real models and servers produce:

- JSON text in Markdown fences, and prose before and after it;
- reasoning before the reply: a ``<think>`` block (sometimes holding a draft JSON
  object that must not be taken for the answer), a block whose opening tag was in the
  prompt (only ``</think>`` shows), or a reasoning content block;
- tool calls written into the message content as JSON instead of native tool calls, in
  the shapes models use (``{"name", "arguments"}``, ``{"tool", "args"}``, ``{"function",
  "parameters"}``, OpenAI's ``{"type": "function", "function": {...}}``, lists of them),
  as models served without a tool-call parser do;
- empty replies; the re-ask that follows one is answered normally;
- transient errors (``ConnectionError``) instead of a reply, on first calls and re-asks
  alike; the retry of the same call is answered;
- extra fields in structured output, and plans that restate tasks of earlier plans.

Decisions are a pure function of the seed and the conversation (and how often that
conversation was sent before), so runs repeat exactly whatever order parallel actors
call in. Structured output is recognised by a forced ``tool_choice`` (what
``with_structured_output`` binds) or, without tools, by a JSON object that is not a
``{"tool", "args"}`` call.

Replies stream as the chunks of :mod:`aimegraph.models.chunks`: the reshaped reply,
decided (faults included) before the first chunk, so a stream and ``invoke`` see the
same shapes and errors. ``with_structured_output`` takes the JSON methods of
:mod:`aimegraph.models.json_modes` as well; ``response_format`` reaches ``inner``.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from aimegraph.models.chunks import WholeReplyStreaming
from aimegraph.models.json_modes import JsonModes

__all__ = ["FuzzChatModel", "FuzzRates"]


class FuzzRates(BaseModel):
    """How often each reshaping applies (each a probability per reply)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fence: float = Field(0.3, ge=0, le=1)
    prose: float = Field(0.3, ge=0, le=1)
    think: float = Field(0.3, ge=0, le=1)
    text_tool_calls: float = Field(0.3, ge=0, le=1)
    empty: float = Field(0.1, ge=0, le=1)
    transient_error: float = Field(0.1, ge=0, le=1)
    extra_fields: float = Field(0.3, ge=0, le=1)
    restate_plan: float = Field(0.5, ge=0, le=1)


_CallShape = Callable[[ToolCall], dict[str, Any]]
_CALL_SHAPES: tuple[_CallShape, ...] = (
    lambda c: {"name": c["name"], "arguments": c["args"]},
    lambda c: {"tool": c["name"], "args": c["args"]},
    lambda c: {"function": c["name"], "parameters": c["args"]},
    lambda c: {
        "type": "function",
        "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
    },
)
_PROSE_BEFORE = (
    "Sure! Here is what I will do next.",
    "Step [2]: let me continue with the task.",
    "I'll answer in the requested format:",
)
_PROSE_AFTER = ("Let me know if you need anything else.", "Hope that helps!", "(end of reply)")
_DRAFTS = (
    '{"name": "submit_result", "arguments": {"status": "failed", "summary": "draft"}}',
    '{"passed": false, "reasoning": "draft", "issues": ["draft"]}',
    '{"tool": "calculator", "args": {"expression": "1/0"}}',
)
_EXTRA_FIELDS = {"confidence": 0.9, "notes": "added by the model"}
# A re-ask extends the conversation it answers by one or two turns.
_RE_ASK_DEPTH = 2


class FuzzChatModel(JsonModes, WholeReplyStreaming):
    """Wraps ``inner`` and reshapes its replies; see the module docstring."""

    inner: BaseChatModel
    seed: int = 0
    rates: FuzzRates = Field(default_factory=FuzzRates)

    _seen: dict[str, int] = PrivateAttr(default_factory=dict)
    _emptied: set[str] = PrivateAttr(default_factory=set)
    _planned: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)
    _applied: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "aimegraph-fuzz"

    @property
    def applied(self) -> dict[str, int]:
        """How many times each reshaping was applied so far."""
        with self._lock:
            return dict(self._applied)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind as ``inner`` would, so its own ``_generate`` gets the same arguments."""
        bound = self.inner.bind_tools(tools, tool_choice=tool_choice, **kwargs)
        inner_kwargs = bound.kwargs if isinstance(bound, RunnableBinding) else {}
        return self.bind(**inner_kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        """The inner model's: the fuzz model stands for it, bent."""
        return self.inner._get_ls_params(stop=stop, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        digests = [_digest(messages[:n]) for n in range(len(messages) + 1)]
        with self._lock:
            sent_before = self._seen.get(digests[-1], 0)
            self._seen[digests[-1]] = sent_before + 1
            re_ask_of_empty = any(d in self._emptied for d in digests[-1 - _RE_ASK_DEPTH : -1])
        rng = random.Random(f"{self.seed}|{digests[-1]}|{sent_before}")
        if sent_before == 0 and rng.random() < self.rates.transient_error:
            self._count("transient_error")
            raise ConnectionError("fuzz: connection reset by peer")
        result = self.inner._generate(messages, stop=stop, **kwargs)
        reply = result.generations[0].message
        assert isinstance(reply, AIMessage)
        if not re_ask_of_empty and rng.random() < self.rates.empty:
            with self._lock:
                self._emptied.add(digests[-1])
            self._count("empty")
            reshaped = AIMessage(content="", response_metadata=reply.response_metadata)
        else:
            structured = kwargs.get("tool_choice") not in (None, "auto", "none")
            reshaped = self._reshape(reply, rng, structured=structured)
        reshaped.usage_metadata = reply.usage_metadata
        return ChatResult(generations=[ChatGeneration(message=reshaped)])

    # --- reshaping a good reply ---

    def _reshape(self, reply: AIMessage, rng: random.Random, *, structured: bool) -> AIMessage:
        meta = reply.response_metadata
        if reply.tool_calls and structured:
            bent = [
                ToolCall(name=c["name"], args=self._bend_object(c["args"], rng), id=c["id"])
                for c in reply.tool_calls
            ]
            return self._with_reasoning(AIMessage(content="", tool_calls=bent), rng, meta)
        if reply.tool_calls:
            if rng.random() < self.rates.text_tool_calls:
                self._count("text_tool_calls")
                shape = rng.choice(_CALL_SHAPES)
                items = [shape(c) for c in reply.tool_calls]
                body = items[0] if len(items) == 1 and rng.random() < 0.7 else items
                text = self._wrap_json(json.dumps(body, indent=rng.choice([None, 2])), rng)
                return self._with_reasoning(AIMessage(content=text), rng, meta)
            native = AIMessage(content="", tool_calls=reply.tool_calls)
            return self._with_reasoning(native, rng, meta)
        text = reply.text
        try:
            data = json.loads(text)
        except ValueError:
            return self._with_reasoning(AIMessage(content=text), rng, meta)
        if isinstance(data, dict) and set(data) == {"tool", "args"}:
            if rng.random() < self.rates.text_tool_calls:
                self._count("text_tool_calls")
                data = rng.choice(_CALL_SHAPES)(
                    ToolCall(name=data["tool"], args=data["args"], id=None)
                )
        elif isinstance(data, dict):
            data = self._bend_object(data, rng)
        text = self._wrap_json(json.dumps(data, indent=rng.choice([None, 2])), rng)
        return self._with_reasoning(AIMessage(content=text), rng, meta)

    def _bend_object(self, data: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """A structured object with extra fields, and a plan restating earlier tasks."""
        tasks = data.get("tasks")
        if isinstance(tasks, list) and all(isinstance(t, dict) and "id" in t for t in tasks):
            with self._lock:
                earlier = [t for i, t in self._planned.items() if i not in {x["id"] for x in tasks}]
                self._planned.update({str(t["id"]): t for t in tasks})
            if earlier and rng.random() < self.rates.restate_plan:
                self._count("restate_plan")
                data = {**data, "tasks": [*earlier, *tasks]}
        if rng.random() < self.rates.extra_fields:
            self._count("extra_fields")
            data = {**data, **_EXTRA_FIELDS}
        return data

    def _wrap_json(self, text: str, rng: random.Random) -> str:
        if rng.random() < self.rates.fence:
            self._count("fence")
            text = f"```json\n{text}\n```"
        if rng.random() < self.rates.prose:
            self._count("prose")
            text = f"{rng.choice(_PROSE_BEFORE)}\n{text}\n{rng.choice(_PROSE_AFTER)}"
        return text

    def _with_reasoning(
        self, message: AIMessage, rng: random.Random, meta: dict[str, Any]
    ) -> AIMessage:
        message.response_metadata = meta
        message.id = f"fuzz-{uuid.UUID(int=rng.getrandbits(128))}"
        if rng.random() >= self.rates.think:
            return message
        self._count("think")
        thought = f"The user wants this done. A first idea: {rng.choice(_DRAFTS)}. No, not yet."
        kind = rng.randrange(3)
        if kind == 2:
            blocks: list[str | dict[str, Any]] = [{"type": "reasoning", "reasoning": thought}]
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            message.content = blocks
        else:
            opening = "<think>" if kind == 0 else ""
            message.content = f"{opening}{thought}</think>\n{message.text}"
        return message

    def _count(self, shape: str) -> None:
        with self._lock:
            self._applied[shape] = self._applied.get(shape, 0) + 1


def _digest(messages: Sequence[BaseMessage]) -> str:
    """A stable digest of a conversation: the human and AI turns (text and tool calls)
    and the names of the tools answered. System prompts and tool outputs are left out:
    they hold the workspace path and today's date, which differ from run to run."""
    parts = [
        json.dumps(
            [m.type, m.name]
            if isinstance(m, ToolMessage)
            else [
                m.type,
                m.content,
                [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])],
            ],
            sort_keys=True,
            default=str,
        )
        for m in messages
        if not isinstance(m, SystemMessage)
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
