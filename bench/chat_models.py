"""The benchmarks' chat models: the scripted model counting the prompt tokens it is
sent, and the same with a fixed latency per call like a remote LLM.

Both answer from a ``ScriptedChatModel`` scenario (see :func:`bench.common.scenario`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from aimegraph.models.offline.scripted import Scenario, ScriptedChatModel


class BenchChatModel(ScriptedChatModel):
    """The scripted model, counting the prompt tokens it is sent as a provider counts
    them: the messages' text and the schemas of the tools bound to the call (about 4
    characters a token). Engine runs and baselines are charged alike, whatever the
    engine's own usage accounting says."""

    _sent: list[tuple[list[BaseMessage], Any]] = PrivateAttr(default_factory=list)
    """Each call's messages and bound tools, counted only when asked: counting while
    timed would charge the side that sends more with the instrument's own work."""

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def reset(self) -> None:
        super().reset()
        self._sent.clear()

    @property
    def calls(self) -> int:
        """Calls since the last ``reset()``."""
        return len(self._sent)

    @property
    def tokens_sent(self) -> int:
        """Prompt tokens sent since the last ``reset()``."""
        return sum(_chars(messages, tools) // 4 + 1 for messages, tools in list(self._sent))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._sent.append((list(messages), kwargs.get("tools")))
        return super()._generate(messages, stop, run_manager, **kwargs)


def _chars(messages: list[BaseMessage], tools: Any) -> int:
    """The characters of a call's message text and bound tool schemas."""
    return sum(len(m.text) for m in messages) + len(json.dumps(tools or [], separators=(",", ":")))


class LatencyChatModel(BenchChatModel):
    """The counting scripted model, taking ``latency_s`` seconds per call like a remote
    LLM: it sleeps (releasing the GIL, as a network wait does), then answers as the
    scripted model does, tool binding and structured output included."""

    latency_s: float = 0.05

    @classmethod
    def from_dict(cls, data: dict[str, Any], latency_s: float = 0.05) -> LatencyChatModel:
        return cls(scenario=Scenario.model_validate(data), latency_s=latency_s)

    @property
    def _llm_type(self) -> str:
        return "bench-latency"

    def delay_s(self, messages: list[BaseMessage]) -> float:
        """How long this call waits before it answers (``latency_s``; subclasses vary it)."""
        return self.latency_s

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        time.sleep(self.delay_s(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)
