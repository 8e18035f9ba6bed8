"""What the resolver sets on the models it builds besides timeouts: a client-side rate
limit per provider and an opt-in cache of replies.

- ``rate_limit`` (``"2/s"``, ``"30/min"``, ``"1000/h"`` or requests per second as a
  number) becomes one langchain-core ``InMemoryRateLimiter`` per provider, shared by
  every role (and fallback member) using that provider, so together they stay under it.
- ``cache`` (a SQLite file path, or any LangChain ``BaseCache``) is set on each model
  (its ``cache`` field), not with the process-wide ``set_llm_cache``, so it never leaks
  into other graphs. A cached reply is replayed for an identical request (same model,
  settings, messages and tools): for development and evals, where re-running a
  scenario should cost nothing; not for production runs, where the same prompt may
  deserve a fresh answer.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel
from langchain_core.rate_limiters import InMemoryRateLimiter

from aimegraph.models.errors import ModelSpecError

__all__ = ["ConversationKeyedCache", "ModelSetup", "open_model_cache", "requests_per_second"]

_PER_SECONDS = {"s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0, "hour": 3600.0}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([a-z]+))?\s*$")

UNLIMITED_PROVIDERS = frozenset({"local", "scripted"})
"""In-process models: nothing to protect with a rate limit."""


def requests_per_second(rate: str | float) -> float:
    """``"2/s"``, ``"30/min"``, ``"1000/h"`` or a number (per second) as requests per second.

    Raises:
        ModelSpecError: for anything else, or a rate that is not positive.
    """
    if isinstance(rate, int | float) and not isinstance(rate, bool):
        value = float(rate)
    else:
        match = _RATE.match(str(rate).lower())
        unit = match.group(2) if match else None
        if match is None or (unit is not None and unit not in _PER_SECONDS):
            raise ModelSpecError(
                f"bad rate limit {rate!r}: write requests per unit, e.g. '2/s', '30/min', '1000/h'"
            )
        value = float(match.group(1)) / _PER_SECONDS[unit or "s"]
    if value <= 0:
        raise ModelSpecError(f"bad rate limit {rate!r}: it must be more than 0 requests")
    return value


class ConversationKeyedCache(BaseCache):
    """``cache`` keyed by what the model is sent: each message without its
    ``usage_metadata`` and ``response_metadata``, which never reach the provider.

    LangChain replays a cached reply with ``total_cost`` added to its usage, so the
    next turn of a conversation holding it (an actor's tool loop) would never match
    the turn first recorded; with this key, every turn of a re-run is a hit.
    """

    _VOLATILE = ("usage_metadata", "response_metadata")

    def __init__(self, cache: BaseCache) -> None:
        self.cache = cache

    def lookup(self, prompt: str, llm_string: str) -> Any:
        return self.cache.lookup(self._key(prompt), llm_string)

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        self.cache.update(self._key(prompt), llm_string, return_val)

    def clear(self, **kwargs: Any) -> None:
        self.cache.clear(**kwargs)

    @classmethod
    def _key(cls, prompt: str) -> str:
        try:
            messages = json.loads(prompt)
        except ValueError:
            return prompt
        if not isinstance(messages, list):
            return prompt
        for message in messages:
            fields = message.get("kwargs") if isinstance(message, dict) else None
            if isinstance(fields, dict):
                for name in cls._VOLATILE:
                    fields.pop(name, None)
        return json.dumps(messages, sort_keys=True)


def open_model_cache(cache: str | Path | BaseCache) -> BaseCache:
    """A ``BaseCache`` as given, or LangChain's ``SQLiteCache`` in the file ``cache``,
    keyed by conversation (:class:`ConversationKeyedCache`)."""
    if isinstance(cache, BaseCache):
        return cache
    path = Path(cache).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # langchain-community announces its sunset on import; the cache is unaffected.
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_community.cache import SQLiteCache
        # Its lookups warn that `loads` will change its default; the file is the user's own.
        warnings.filterwarnings(
            "ignore", message=".*allowed_objects", module="langchain_community.cache"
        )
        return ConversationKeyedCache(SQLiteCache(database_path=str(path)))
    except Exception as exc:  # sqlalchemy's errors, OSError: one line either way
        raise ModelSpecError(f"cannot open the model cache {str(path)!r}: {exc}") from exc


@dataclass
class ModelSetup:
    """The client settings of the models one resolution builds."""

    timeout: float | None
    max_retries: int
    rate_limit: str | float | None = None
    cache: str | Path | BaseCache | None = None
    _limiters: dict[str, InMemoryRateLimiter] = field(default_factory=dict, repr=False)
    _cache: BaseCache | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Checked before any model is built: a bad value is one line, not a late failure.
        self._rate = requests_per_second(self.rate_limit) if self.rate_limit is not None else None
        self._cache = open_model_cache(self.cache) if self.cache is not None else None

    def applied(self, model: BaseChatModel, provider: str) -> BaseChatModel:
        """``model`` (built by the resolver) with the provider's limiter and the cache."""
        update: dict[str, object] = {}
        if self._rate is not None and provider not in UNLIMITED_PROVIDERS:
            update["rate_limiter"] = self._limiters.setdefault(
                provider, InMemoryRateLimiter(requests_per_second=self._rate)
            )
        if self._cache is not None:
            update["cache"] = self._cache
        # A copy: a loader may hand the same instance to other graphs (the local model).
        return model.model_copy(update=update) if update else model
