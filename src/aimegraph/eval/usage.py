"""Counting what a rollout spends, the same way for every system under test.

Every system's run gets one :class:`UsageCounter` in its ``callbacks``: LangChain's
``UsageMetadataCallbackHandler``, which adds up each reply's ``usage_metadata``
(input and output tokens, ``input_token_details.cache_read``,
``output_token_details.reasoning``) by model name, plus a count of calls. No
system's own bookkeeping is read, so aimegraph and a ReAct loop are counted alike.
Cost comes from one price table: USD per million tokens ``(input, output)`` or
``(input, output, cached input)`` by model name; with no price for any model a
rollout used, its cost is ``None`` (unknown, shown as such), never $0.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.outputs import ChatGeneration, LLMResult

__all__ = ["Price", "Prices", "RolloutUsage", "UsageCounter", "seeded"]

Price = tuple[float, float] | tuple[float, float, float]
Prices = Mapping[str, Price]

UNNAMED = "(unnamed model)"
"""The model name a reply without ``response_metadata["model_name"]`` is counted under."""


@dataclass(frozen=True)
class RolloutUsage:
    """What a rollout spent: calls and tokens (cached input is part of input, reasoning
    part of output, as providers report them) and their cost, in all and by model
    (``None``: no model it used has a price)."""

    llm_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    by_model: dict[str, dict[str, float | None]] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> RolloutUsage:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})

    def __add__(self, other: RolloutUsage) -> RolloutUsage:
        models = {name: dict(counts) for name, counts in self.by_model.items()}
        for name, counts in other.by_model.items():
            mine = models.setdefault(name, {})
            for key, value in counts.items():
                mine[key] = plus(mine.get(key), value)
        return RolloutUsage(
            llm_calls=self.llm_calls + other.llm_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=plus(self.cost_usd, other.cost_usd),
            by_model=models,
        )


def plus(a: float | None, b: float | None) -> float | None:
    """A sum where ``None`` is unknown: unknown only when both are."""
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


def cost_of(usage: UsageMetadata, price: Price | None) -> float | None:
    """USD for ``usage`` at ``price`` (cached input at its own rate when given);
    ``None`` without a price."""
    if price is None:
        return None
    cached = int(usage.get("input_token_details", {}).get("cache_read", 0) or 0)
    cached_rate = price[2] if len(price) == 3 else price[0]
    fresh = int(usage.get("input_tokens", 0)) - cached
    return (
        fresh * price[0] + cached * cached_rate + int(usage.get("output_tokens", 0)) * price[1]
    ) / 1e6


class UsageCounter(UsageMetadataCallbackHandler):
    """LangChain's usage handler, also counting the calls (replies) per model and
    keeping the usage of replies that name no model (under :data:`UNNAMED`)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        message = _reply(response)
        name = message.response_metadata.get("model_name") if message is not None else None
        with self._count_lock:  # every write under it, so totals() reads a consistent view
            super().on_llm_end(response, **kwargs)
            self.calls[str(name or UNNAMED)] += 1
            if message is not None and message.usage_metadata and not name:
                known = self.usage_metadata.get(UNNAMED)
                self.usage_metadata[UNNAMED] = add_usage(known, message.usage_metadata)

    @property
    def llm_calls(self) -> int:
        with self._count_lock:
            return sum(self.calls.values())

    @property
    def total_tokens(self) -> int:
        with self._count_lock:
            return sum(int(u.get("total_tokens", 0)) for u in self.usage_metadata.values())

    def totals(self, prices: Prices | None = None) -> RolloutUsage:
        """Everything counted so far, priced with ``prices`` (by model name)."""
        total = RolloutUsage()
        with self._count_lock:
            names = sorted(set(self.usage_metadata) | set(self.calls))
            snapshot = {name: self.usage_metadata.get(name) for name in names}
            calls = dict(self.calls)
        for name in names:
            usage = snapshot[name] or UsageMetadata(input_tokens=0, output_tokens=0, total_tokens=0)
            model = RolloutUsage(
                llm_calls=calls.get(name, 0),
                input_tokens=int(usage.get("input_tokens", 0)),
                cached_input_tokens=int(
                    usage.get("input_token_details", {}).get("cache_read", 0) or 0
                ),
                output_tokens=int(usage.get("output_tokens", 0)),
                reasoning_tokens=int(
                    usage.get("output_token_details", {}).get("reasoning", 0) or 0
                ),
                cost_usd=cost_of(usage, (prices or {}).get(name)),
            )
            counts = {k: v for k, v in model.record().items() if k != "by_model"}
            total = total + RolloutUsage(**counts, by_model={name: counts})
        return total


def _reply(response: LLMResult) -> AIMessage | None:
    try:
        generation = response.generations[0][0]
    except IndexError:
        return None
    if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
        return generation.message
    return None


def seeded(model: BaseChatModel, seed: int) -> tuple[BaseChatModel, bool]:
    """``model`` sending ``seed`` with each request, when its client takes a seed per
    request (OpenAI and compatible servers); else ``model`` unchanged and ``False``.
    llama.cpp models fix their seed when they load, and the scripted models are
    deterministic anyway."""
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - a dependency of the base install
        return model, False
    if isinstance(model, BaseChatOpenAI):
        return model.model_copy(update={"seed": seed}), True
    return model, False
