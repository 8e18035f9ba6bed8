"""What the model-resolution tests share: a fake chat model, no OpenAI settings from
the environment (``clean_openai_env``, autouse in each file that imports it), a port
that accepts connections (``model_server``; import ``model_server_fixture``) and providers ready to resolve
(``providers_ready``: an Anthropic key, an Ollama host that accepts connections), since
resolving a spec checks its key or its server."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

OPENAI_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")


@pytest.fixture(autouse=True)
def clean_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


def fake_model(text: str = "hi") -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


@pytest.fixture(name="model_server")
def model_server_fixture() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a socket that accepts connections and never answers
    (the kernel completes the handshake of a listening socket): enough for the check a
    spec's resolution makes, and no request is sent while resolving."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def providers_ready(monkeypatch: pytest.MonkeyPatch, model_server: str) -> None:
    """``anthropic:`` and ``ollama:`` specs resolve: a key, the real API, a server up."""
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OLLAMA_HOST", model_server)
