"""What the model-resolution tests share: a fake chat model, and no OpenAI settings
from the environment (``clean_openai_env``, autouse in each file that imports it)."""

from __future__ import annotations

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
