"""Resolution options that wrap the models: fallback chains, rate limits, the reply cache.

Comma-separated or listed specs become a ``FallbackChatModel``; roles on one provider
share its rate limiter (an eval too); rates parse or fail in one line; the reply cache
is set on each model, never globally, and keys on what the provider is sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage
from langchain_ollama import ChatOllama
from tests.model_resolution import (
    clean_openai_env,  # noqa: F401 - autouse fixture
    fake_model,
    model_server_fixture,  # noqa: F401 - the model_server fixture, for providers_ready
    providers_ready,  # noqa: F401 - fixture
)

from aimegraph import AimeConfig
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.resilience import ConversationKeyedCache, requests_per_second
from aimegraph.models.resolve import (
    ModelResolver,
    ModelSpecError,
    resolve_model,
    resolve_models,
    supports_structured_output,
    supports_tool_calling,
)

pytestmark = pytest.mark.usefixtures("providers_ready")

# --------------------------------------------------------------------------- fallbacks, rate limit, cache


@pytest.mark.parametrize(
    "spec",
    ["anthropic:claude-x, ollama:llama3.2", ["anthropic:claude-x", "ollama:llama3.2"]],
    ids=["commas", "list"],
)
def test_a_fallback_chain_is_its_members_in_order(spec: Any) -> None:
    chain = resolve_model(spec, timeout=5.0)
    assert isinstance(chain, FallbackChatModel)
    first, second = chain.models
    assert isinstance(first, ChatAnthropic) and first.model == "claude-x"
    assert first.default_request_timeout == 5.0
    assert isinstance(second, ChatOllama) and second.model == "llama3.2"
    assert supports_tool_calling(chain) and supports_structured_output(chain)


def test_a_chain_of_one_is_that_model() -> None:
    assert isinstance(resolve_model(["anthropic:claude-x"]), ChatAnthropic)


def test_a_chain_supports_tool_calling_only_when_every_member_does() -> None:
    chain = resolve_model(["anthropic:claude-x", fake_model()])
    assert not supports_tool_calling(chain)


def test_a_bad_member_of_a_chain_is_named() -> None:
    with pytest.raises(ModelSpecError, match="unknown model spec 'nonsense'"):
        resolve_model("anthropic:claude-x,nonsense")


def test_roles_using_a_provider_share_its_rate_limiter() -> None:
    resolved = resolve_models(
        "anthropic:claude-x",
        {"actor": "ollama:llama3.2,anthropic:claude-y", "verifier": "scripted:demo"},
        rate_limit="30/min",
    )
    planner, actor = resolved["planner"], resolved["actor"]
    assert isinstance(actor, FallbackChatModel)
    ollama, anthropic = actor.models
    limiter = planner.rate_limiter
    assert limiter is not None and limiter.requests_per_second == 0.5
    assert anthropic.rate_limiter is limiter and resolved["reporter"].rate_limiter is limiter
    assert ollama.rate_limiter is not None and ollama.rate_limiter is not limiter
    assert resolved["verifier"].rate_limiter is None  # in-process: nothing to protect


def test_an_eval_shares_one_limiter_per_provider_across_its_specs() -> None:
    from aimegraph.eval.rollout import ModelSource

    source = ModelSource("anthropic:claude-x", ModelResolver(rate_limit="2/s", cache=None))
    one = source._resolve("anthropic:claude-x")
    two = source._resolve("anthropic:claude-y,ollama:llama3.2")
    assert isinstance(two, FallbackChatModel)
    assert one.rate_limiter is not None and two.models[0].rate_limiter is one.rate_limiter
    assert two.models[1].rate_limiter is not one.rate_limiter


def test_without_a_rate_limit_no_limiter_is_set() -> None:
    assert resolve_model("anthropic:claude-x").rate_limiter is None


def test_a_model_object_is_left_as_given() -> None:
    model = fake_model()
    assert resolve_model(model, rate_limit="2/s", cache=ConversationKeyedCache(None)) is model  # type: ignore[arg-type]
    assert model.rate_limiter is None and model.cache is None


@pytest.mark.parametrize(
    ("rate", "expected"),
    [("2/s", 2.0), ("30/min", 0.5), ("3600/h", 1.0), (" 4 / sec ", 4.0), ("3", 3.0), (0.5, 0.5)],
)
def test_rates(rate: Any, expected: float) -> None:
    assert requests_per_second(rate) == expected


@pytest.mark.parametrize("rate", ["fast", "2/fortnight", "0/s", "-1/s", "/s", 0])
def test_a_bad_rate_is_one_line(rate: Any) -> None:
    with pytest.raises(ModelSpecError, match="bad rate limit") as info:
        resolve_model("anthropic:claude-x", rate_limit=rate)
    assert "\n" not in str(info.value)


def test_a_bad_rate_in_the_config_is_refused() -> None:
    with pytest.raises(ValueError, match="bad rate limit 'fast'"):
        AimeConfig(rate_limit="fast")
    assert AimeConfig(rate_limit="2/s").rate_limit == "2/s"


def test_the_reply_cache_is_set_on_each_model_not_globally(tmp_path: Path) -> None:
    from langchain_core.globals import get_llm_cache

    resolved = resolve_models(
        "anthropic:claude-x", {"actor": "ollama:llama3.2"}, cache=tmp_path / "c" / "r.db"
    )
    cache = resolved["planner"].cache
    assert isinstance(cache, ConversationKeyedCache)
    assert resolved["actor"].cache is cache
    assert (tmp_path / "c" / "r.db").exists()
    assert get_llm_cache() is None


def test_the_cache_key_ignores_what_the_provider_is_not_sent(tmp_path: Path) -> None:
    from langchain_core.load import dumps
    from langchain_core.outputs import Generation

    cache = resolve_model("anthropic:claude-x", cache=tmp_path / "r.db").cache
    assert isinstance(cache, ConversationKeyedCache)
    said = AIMessage(
        "hi", usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    )
    cache.update(dumps([said]), "llm", [Generation(text="cached")])
    replayed = said.model_copy(
        update={"usage_metadata": {**said.usage_metadata, "total_cost": 0}}  # type: ignore[typeddict-item]
    )
    hit = cache.lookup(dumps([replayed]), "llm")
    assert hit is not None and hit[0].text == "cached"
    assert cache.lookup(dumps([AIMessage("other")]), "llm") is None


def test_an_unusable_cache_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelSpecError, match="cannot open the model cache"):
        resolve_model("anthropic:claude-x", cache=tmp_path / "file" / "r.db")
