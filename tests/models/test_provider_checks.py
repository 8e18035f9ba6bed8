"""A provider spec is checked when it is resolved, so every entry point refuses it in one
line before it stores anything: the API key its LangChain class reads (named as the class
declares it), or, for a model that needs no key, a server that accepts a connection
(named with its address and the variable that sets it); a provider whose package is
missing names what to install, and a misspelt one the provider it may have meant.

The sweep runs over every provider in LangChain's own registry of ``init_chat_model``'s
built-in providers, with no credentials in the environment.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
from collections.abc import Iterator

import pytest
from langchain.chat_models import base as chat_models_base
from langchain_anthropic import ChatAnthropic
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI
from tests.model_resolution import fake_model, model_server_fixture  # noqa: F401 - model_server

from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.preflight import PROVIDER_KEY_VARIABLES
from aimegraph.models.resolve import ModelSpecError, resolve_model

LANGCHAIN_PROVIDERS: dict[str, tuple[str, str]] = {
    name: (entry[0], entry[1]) for name, entry in chat_models_base._BUILTIN_PROVIDERS.items()
}
"""init_chat_model's providers: name -> (module, class name), as LangChain lists them."""

OLLAMA_DEFAULT = ("127.0.0.1", 11434)

_CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "BASE", "URL", "HOST", "ENDPOINT")
_CREDENTIAL_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "LANGSMITH_", "WATSONX_", "OLLAMA_")


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, token, base URL or host of any provider in the environment."""
    for name in list(os.environ):
        upper = name.upper()
        if any(word in upper for word in _CREDENTIAL_WORDS) or upper.startswith(
            _CREDENTIAL_PREFIXES
        ):
            monkeypatch.delenv(name)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 nobody listens on (bound, never listening: refused)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _refusal(spec: str) -> str:
    """The one line resolving ``spec`` is refused with (any other outcome fails)."""
    with pytest.raises(ModelSpecError) as refused:
        resolve_model(spec)
    message = str(refused.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def _declared_key_variables(module: str, class_name: str) -> list[str]:
    """The variables of the keys and tokens the class declares (its ``lc_secrets``)."""
    cls = getattr(importlib.import_module(module), class_name)
    secrets: dict[str, str] = cls.model_construct().lc_secrets
    return [env for env in secrets.values() if env.endswith(("_KEY", "_TOKEN"))]


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize("provider", sorted(LANGCHAIN_PROVIDERS))
def test_every_builtin_provider_is_refused_up_front_without_credentials(provider: str) -> None:
    module, class_name = LANGCHAIN_PROVIDERS[provider]
    try:
        importlib.import_module(module)
    except ImportError:
        message = _refusal(f"{provider}:some-model")
        assert "needs the package" in message and "pip install " in message
        return
    if provider in PROVIDER_KEY_VARIABLES:  # keys its creator reads, not its class
        expected = list(PROVIDER_KEY_VARIABLES[provider])
    else:
        expected = _declared_key_variables(module, class_name)
    if not expected and _listening(*OLLAMA_DEFAULT):
        pytest.skip("a model server listens on this machine's default address")
    message = _refusal(f"{provider}:some-model")
    if expected:
        assert any(variable in message for variable in expected), message
    else:  # no key: a server of the user's, which is not up
        assert re.search(r"no server answers at \S+:\d+ \(.+\); start it, or set [A-Z_]+ ", message)


@pytest.mark.usefixtures("no_credentials")
def test_anthropic_without_its_key_names_the_variable() -> None:
    assert _refusal("anthropic:claude-x") == (
        "model 'anthropic:claude-x' needs an API key: set ANTHROPIC_API_KEY"
    )


@pytest.mark.usefixtures("no_credentials")
def test_ollama_without_a_server_names_its_default_address_and_variable() -> None:
    if _listening(*OLLAMA_DEFAULT):
        pytest.skip("an Ollama server listens on this machine")
    assert _refusal("ollama:llama3") == (
        "model 'ollama:llama3': no server answers at 127.0.0.1:11434 (Connection refused); "
        "start it, or set OLLAMA_HOST to its address"
    )


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "http://127.0.0.1:{port}"])
def test_ollama_host_without_a_server_is_named(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, host: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", host.format(port=closed_port))
    message = _refusal("ollama:llama3")
    assert f"no server answers at 127.0.0.1:{closed_port}" in message
    assert message.endswith("set OLLAMA_HOST to its address")


@pytest.mark.usefixtures("no_credentials")
def test_an_ollama_server_that_listens_is_taken(
    monkeypatch: pytest.MonkeyPatch, model_server: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", model_server)
    assert resolve_model("ollama:llama3").model == "llama3"  # type: ignore[attr-defined]


@pytest.mark.usefixtures("no_credentials")
def test_an_openai_compatible_server_without_a_key_must_answer(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port}/v1")
    assert _refusal("openai:llama3") == (
        f"model 'openai:llama3': no server answers at 127.0.0.1:{closed_port} "
        "(Connection refused); start it, or set OPENAI_BASE_URL to its address"
    )


@pytest.mark.usefixtures("no_credentials")
def test_a_base_url_of_the_users_stands_in_for_a_missing_key(
    monkeypatch: pytest.MonkeyPatch, model_server: str, closed_port: int
) -> None:
    # A gateway or proxy may hold the key itself: it is checked as a server instead.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server)
    assert isinstance(resolve_model("anthropic:claude-x"), ChatAnthropic)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port}")
    message = _refusal("anthropic:claude-y")
    assert f"127.0.0.1:{closed_port}" in message and "ANTHROPIC_BASE_URL" in message


@pytest.mark.usefixtures("no_credentials")
def test_a_key_is_enough_whatever_the_network(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    # With a key the model is a service: whether it answers is its calls' business
    # (retried as transient), not the resolver's.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port}")
    assert isinstance(resolve_model("anthropic:claude-x"), ChatAnthropic)


@pytest.mark.usefixtures("no_credentials")
def test_a_fallback_chain_names_the_member_that_is_not_ready(
    monkeypatch: pytest.MonkeyPatch, model_server: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", model_server)
    assert _refusal("ollama:llama3,anthropic:claude-x") == (
        "model 'anthropic:claude-x' needs an API key: set ANTHROPIC_API_KEY"
    )


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("antropic:claude", "anthropic"),
        ("olama:llama3", "ollama"),
        ("googlegenai:gemini", "google_genai"),
        ("scriptd:demo", "scripted"),
        ("lokal", "local"),
    ],
)
def test_a_misspelt_provider_gets_a_did_you_mean(spec: str, meant: str) -> None:
    message = _refusal(spec)
    assert f"(did you mean {meant!r}?)" in message
    assert "'<provider>:<model>'" in message  # and the accepted forms


def test_a_provider_nothing_resembles_gets_no_guess() -> None:
    message = _refusal("zzzzqqq:m")
    assert message.startswith("unknown model provider 'zzzzqqq' in 'zzzzqqq:m'; accepted: ")


# --------------------------------------------------------------------------- fallback chains
# A member whose server is down (a state that may pass) stays in a chain while another
# member is ready; a member's configuration mistake refuses the chain at once.


@pytest.mark.usefixtures("no_credentials")
def test_a_chain_keeps_a_member_whose_server_is_down_while_another_is_ready(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port}")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    chain = resolve_model("ollama:llama3,openai:gpt-4o-mini")
    assert isinstance(chain, FallbackChatModel)
    local, cloud = chain.models
    assert isinstance(local, ChatOllama) and local.model == "llama3"
    assert isinstance(cloud, ChatOpenAI) and cloud.model_name == "gpt-4o-mini"


@pytest.mark.usefixtures("no_credentials")
def test_a_call_moves_on_from_the_member_whose_server_is_down(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port}")
    chain = resolve_model(["ollama:llama3", fake_model("from the next member")])
    assert chain.invoke("hello").content == "from the next member"


@pytest.mark.usefixtures("no_credentials")
def test_a_chain_none_of_whose_servers_answers_names_each(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port}")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port}/v1")
    assert _refusal("ollama:llama3,openai:llama3") == (
        "no model of the fallback chain is ready: "
        f"(1) model 'ollama:llama3': no server answers at 127.0.0.1:{closed_port} "
        "(Connection refused); start it, or set OLLAMA_HOST to its address; "
        f"(2) model 'openai:llama3': no server answers at 127.0.0.1:{closed_port} "
        "(Connection refused); start it, or set OPENAI_BASE_URL to its address"
    )


@pytest.mark.usefixtures("no_credentials")
def test_a_chain_member_without_its_key_is_refused_while_another_is_ready(
    monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port}")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert _refusal("ollama:llama3,anthropic:claude-x,openai:gpt-4o-mini") == (
        "model 'anthropic:claude-x' needs an API key: set ANTHROPIC_API_KEY"
    )
