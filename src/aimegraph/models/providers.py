"""Chat models of every provider LangChain's ``init_chat_model`` knows (``anthropic:``,
``ollama:``, ``google_genai:``, ``mistralai:``, ``bedrock_converse:`` ...).

:func:`provider_model` turns a ``<provider>:<model>`` spec into the provider's chat model,
with aimegraph's timeout and retry settings in the form its class takes them, and every
way it can fail as one :class:`ModelSpecError` line: an unknown provider, a provider
package that is not installed (naming the package to install), a class that refuses
its settings, a model without its API key (see :mod:`aimegraph.models.preflight`). It
hands back the server of the user's the model must reach, which its caller checks.

Each provider reads its own environment: ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``,
``OLLAMA_HOST``, ``GOOGLE_API_KEY``, ``MISTRAL_API_KEY``, AWS's usual variables, ...
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from typing import Any

from langchain_core.language_models import BaseChatModel

from aimegraph.models.errors import ModelSpecError
from aimegraph.models.preflight import ModelServer, check_provider_key, server_to_reach

__all__ = [
    "PROVIDER_EXTRAS",
    "UnknownProviderError",
    "builtin_providers",
    "did_you_mean",
    "provider_model",
]

PROVIDER_EXTRAS: dict[str, str] = {"anthropic": "langchain_anthropic", "ollama": "langchain_ollama"}
"""Providers whose package the aimegraph extra of the same name installs
(``pip install 'aimegraph[anthropic]'``), and the module that package brings."""


class UnknownProviderError(ModelSpecError):
    """``init_chat_model`` knows no such provider (the resolver adds the accepted forms)."""


def builtin_providers() -> tuple[str, ...]:
    """The providers ``init_chat_model`` knows, from its own registry: LangChain keeps no
    public list (``_BUILTIN_PROVIDERS`` in current releases, ``_SUPPORTED_PROVIDERS`` in
    1.0, which ``langchain>=1.0`` still admits)."""
    from langchain.chat_models import base

    registry = getattr(base, "_BUILTIN_PROVIDERS", None)
    if registry is None:  # langchain 1.0
        registry = base._SUPPORTED_PROVIDERS  # type: ignore[attr-defined]
    return tuple(sorted(registry))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def provider_model(
    provider: str, name: str, spec: str, *, timeout: float | None, max_retries: int
) -> tuple[BaseChatModel, ModelServer | None]:
    """``provider``'s chat model ``name`` through ``init_chat_model``, and the server of
    the user's it must reach, if any (not yet checked).

    ``timeout`` (seconds per request) and ``max_retries`` (client retries) are passed as
    the provider's class takes them (see :func:`client_settings`).

    The model is checked as :func:`~aimegraph.models.preflight.server_to_reach` says:
    an API key for a class that reads one, else a server, the one returned.

    Raises:
        UnknownProviderError: for a provider LangChain does not know.
        ModelSpecError: for a provider package that is not installed, a model its class
            refuses to build, a model without its API key.
    """
    if provider not in builtin_providers():
        raise UnknownProviderError(f"unknown model provider {provider!r} in {spec!r}")
    check_provider_key(provider, spec)
    try:
        if (module := PROVIDER_EXTRAS.get(provider)) is not None:
            # First: without langchain-ollama, init_chat_model falls back to
            # langchain-community's ChatOllama, which that package no longer has.
            importlib.import_module(module)
        # Built once to learn the class init_chat_model picks, then again with the
        # settings that class takes (few do without them; building is cheap and lazy).
        model = _init(provider, name)
        settings = client_settings(type(model), timeout=timeout, max_retries=max_retries)
        model = _init(provider, name, **settings) if settings else model
    except ImportError as exc:
        raise ModelSpecError(missing_package_line(spec, provider, exc)) from exc
    except Exception as exc:
        # A class that cannot be built is the user's setup, whatever its error type
        # (pydantic's ValidationError, openai.OpenAIError for a missing key, botocore's
        # NoRegionError, ...).
        raise ModelSpecError(f"cannot build model {spec!r}: {_one_line(exc)}") from exc
    return model, server_to_reach(model, spec, provider)


def client_settings(
    cls: type[BaseChatModel], *, timeout: float | None, max_retries: int
) -> dict[str, Any]:
    """The timeout and retry keyword arguments ``cls`` takes.

    Most classes take ``timeout`` (a field or its alias) and ``max_retries``; Ollama's
    takes its HTTP client's arguments (``client_kwargs``) and has no client retries.
    A class with neither keeps its own defaults: passing what it does not know would be
    refused (``extra="forbid"``) or, worse, sent to the API as a model parameter.
    """
    names = {
        key for field_name, field in cls.model_fields.items() for key in (field_name, field.alias)
    }
    settings: dict[str, Any] = {}
    if "timeout" in names:
        settings["timeout"] = timeout
    elif "client_kwargs" in names:
        settings["client_kwargs"] = {"timeout": timeout}
    if "max_retries" in names:
        settings["max_retries"] = max_retries
    return settings


def missing_package_line(spec: str, provider: str, exc: ImportError) -> str:
    """One line naming the package ``spec`` needs and how to install it."""
    cause = exc.__cause__ if isinstance(exc.__cause__, ImportError) else exc
    package = (cause.name or f"langchain_{provider}").split(".")[0].replace("_", "-")
    install = f"'aimegraph[{provider}]'" if provider in PROVIDER_EXTRAS else package
    return f"model {spec!r} needs the package {package}: pip install {install}"


def _init(provider: str, name: str, **settings: Any) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    return init_chat_model(name, model_provider=provider, **settings)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
