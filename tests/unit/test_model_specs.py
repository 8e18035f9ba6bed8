"""Model resolution from spec strings, per-role models, and tool-calling detection.

Model objects pass through; ``openai:`` (keys, compatible servers, bounded timeout and
retries), other LangChain providers and ``scripted:`` specs build their models; bad
specs are one-line errors; ``resolve_models`` gives every role a model.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI
from tests.model_resolution import (
    clean_openai_env,  # noqa: F401 - autouse fixture
    fake_model,
    model_server_fixture,  # noqa: F401 - the model_server fixture
)

import aimegraph.models.local as local_module
from aimegraph import AimeConfig
from aimegraph.models import ScriptedChatModel
from aimegraph.models.providers import client_settings, missing_package_line
from aimegraph.models.resolve import (
    PLACEHOLDER_API_KEY,
    ROLES,
    ModelSpecError,
    resolve_model,
    resolve_models,
    supports_tool_calling,
)

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
    monkeypatch: pytest.MonkeyPatch, model_server: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{model_server}/v1")
    model = resolve_model("openai:qwen2.5-7b-instruct")
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == f"{model_server}/v1"
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


def test_openai_legacy_api_base_env(monkeypatch: pytest.MonkeyPatch, model_server: str) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", f"{model_server}/v1")
    model = resolve_model("openai:llama3.2")
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == f"{model_server}/v1"


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
    monkeypatch: pytest.MonkeyPatch, model_server: str
) -> None:
    # No key: a base URL of the user's (a gateway) is checked for a listener instead.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server)
    model = resolve_model("anthropic:claude-x", timeout=30, max_retries=5)
    assert isinstance(model, ChatAnthropic)
    assert model.model == "claude-x"
    assert model.default_request_timeout == 30 and model.max_retries == 5
    # ...and the Anthropic SDK client it sends requests with has them.
    assert model._client.timeout == 30 and model._client.max_retries == 5
    assert str(model._client.base_url).startswith(model_server)


@pytest.mark.usefixtures("_no_anthropic_env")
def test_anthropic_spec_gets_the_default_timeout_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    model = resolve_model("anthropic:claude-x")
    assert isinstance(model, ChatAnthropic)
    assert model.default_request_timeout == AimeConfig().model_timeout_s
    assert model.max_retries == AimeConfig().model_retries


def test_ollama_spec_takes_the_timeout_through_its_http_client(
    monkeypatch: pytest.MonkeyPatch, model_server: str
) -> None:
    # ChatOllama has no `timeout` or `max_retries` field: the timeout goes to its
    # client (the node's retry policy still retries its transient errors).
    monkeypatch.setenv("OLLAMA_HOST", model_server)
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
