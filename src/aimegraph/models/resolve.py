"""Model resolution: from a spec string (or a ready model) to a LangChain chat model.

Accepted specs:

- a ``BaseChatModel`` instance: returned unchanged;
- ``openai:<model>``: :class:`langchain_openai.ChatOpenAI`. Honours ``OPENAI_API_KEY`` and
  ``OPENAI_BASE_URL`` (or LangChain's ``OPENAI_API_BASE``), so any OpenAI-compatible server
  works (vLLM, Ollama, llama.cpp server, LM Studio). With a base URL and no key a
  placeholder key is sent, since such servers do not check it, and the server must
  accept a connection when the spec is resolved (in a fallback chain: unless another
  member is ready);
- ``<provider>:<model>`` for any other provider LangChain's ``init_chat_model`` knows
  (``anthropic``, ``ollama``, ``google_genai``, ``mistralai``, ``bedrock_converse``, ...),
  see :mod:`aimegraph.models.providers`; its API key, or its server for one that needs
  no key, is checked when the spec is resolved (:mod:`aimegraph.models.preflight`), a
  chain member's server only when no member before it is ready;
- ``local`` or ``local:<path-to-gguf>``: the bundled Gemma 3 270M (or the given GGUF)
  in-process through llama.cpp, see :mod:`aimegraph.models.local` (extra ``[local]``);
- ``scripted:<scenario>``: the deterministic offline model of
  :mod:`aimegraph.models.offline.scripted`;
- a list of the above, or specs joined by commas: a fallback chain
  (:mod:`aimegraph.models.fallbacks`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel

from aimegraph.models.errors import ModelSpecError
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.preflight import ModelServer, ServerNotAnsweringError
from aimegraph.models.providers import (
    UnknownProviderError,
    builtin_providers,
    did_you_mean,
    provider_model,
)
from aimegraph.models.resilience import ModelSetup

__all__ = [
    "ROLES",
    "ModelResolver",
    "ModelSpec",
    "ModelSpecError",
    "check_goal",
    "resolve_model",
    "resolve_models",
    "supports_structured_output",
    "supports_tool_calling",
]

ROLES: tuple[str, ...] = ("planner", "actor", "verifier", "reporter")

ACCEPTED_SPECS = (
    "'openai:<model>' (OpenAI or an OpenAI-compatible server via OPENAI_BASE_URL), "
    "'<provider>:<model>' for any provider LangChain's init_chat_model knows "
    "(anthropic, ollama, google_genai, mistralai, bedrock_converse, ...), "
    "'local' or 'local:<path-to-gguf>' (llama.cpp, extra [local]), "
    "'scripted:<scenario>' (offline demo), or a LangChain BaseChatModel instance"
)

# Sent when OPENAI_BASE_URL points at a server that does not check keys.
PLACEHOLDER_API_KEY = "not-needed"

# Remote model requests: seconds per request and client retries (AimeConfig's defaults).
# The node that makes the call retries transient errors too (LLM_RETRY_POLICY, 3
# attempts), so an unresponsive server fails after at most
# 3 * (1 + retries) * timeout seconds plus backoff: 6 minutes with these values.
DEFAULT_MODEL_TIMEOUT_S = 60.0
DEFAULT_MODEL_RETRIES = 1


ModelSpec = str | BaseChatModel | Sequence[str | BaseChatModel]
"""A model: a spec string, a chat model, or a fallback chain of them (a list, or specs
joined by commas: ``"openai:gpt-4o-mini,anthropic:claude-3-5-haiku-latest"``)."""


def resolve_model(
    spec: ModelSpec,
    *,
    timeout: float | None = DEFAULT_MODEL_TIMEOUT_S,
    max_retries: int = DEFAULT_MODEL_RETRIES,
    rate_limit: str | float | None = None,
    cache: str | Path | BaseCache | None = None,
) -> BaseChatModel:
    """Return the chat model a spec names; a ``BaseChatModel`` passes through unchanged.

    ``timeout`` (seconds per request) and ``max_retries`` (client retries) apply to
    remote models (as each provider's class takes them); ``build_aime_graph`` passes
    ``AimeConfig.model_timeout_s`` and ``model_retries``. ``rate_limit`` (``"2/s"``,
    ``"30/min"``) and ``cache`` (a SQLite path) apply to the models built from specs,
    see :mod:`aimegraph.models.resilience`. A list (or comma-separated specs) is a
    fallback chain, see :mod:`aimegraph.models.fallbacks`: a member whose server does
    not accept a connection stays in it while another member is ready (the server may
    be started later; a call moves on from it as from any member that fails
    transiently).

    Raises:
        ModelSpecError: for an unknown or incomplete spec (with the provider it may
            have meant), a missing API key (naming its variable), a model server that
            does not accept a connection (naming its address and variable; for a chain,
            every member's when none is ready), a missing
            optional dependency or provider package (the line names what to install), a
            bad rate limit, or a cache file that cannot be opened.
    """
    resolver = ModelResolver(
        timeout=timeout, max_retries=max_retries, rate_limit=rate_limit, cache=cache
    )
    return resolver.resolve(spec)


def resolve_models(
    model: ModelSpec | None,
    models: Mapping[str, ModelSpec] | None = None,
    *,
    timeout: float | None = DEFAULT_MODEL_TIMEOUT_S,
    max_retries: int = DEFAULT_MODEL_RETRIES,
    rate_limit: str | float | None = None,
    cache: str | Path | BaseCache | None = None,
) -> dict[str, BaseChatModel]:
    """One model per role in :data:`ROLES`: ``models[role]`` if given, else ``model``.

    Each distinct spec string is resolved once, so roles sharing ``"local"`` share one
    loaded model, and roles using one provider share its rate limiter.

    Raises:
        ModelSpecError: for an unknown role name, a role left without a model, or a spec
            :func:`resolve_model` rejects.
    """
    overrides = dict(models or {})
    unknown = sorted(set(overrides) - set(ROLES))
    if unknown:
        raise ModelSpecError(
            f"unknown model role(s) {', '.join(map(repr, unknown))}; roles are {', '.join(ROLES)}"
        )
    resolver = ModelResolver(
        timeout=timeout, max_retries=max_retries, rate_limit=rate_limit, cache=cache
    )
    resolved: dict[str, BaseChatModel] = {}
    for role in ROLES:
        spec = overrides.get(role, model)
        if spec is None:
            raise ModelSpecError(f"no model for the {role} role: pass model= or models[{role!r}]")
        resolved[role] = resolver.resolve(spec)
    return resolved


class ModelResolver:
    """Resolves specs with the same settings, each distinct spec string once: the
    models it builds share one rate limiter per provider and the cache (an eval's
    models across its systems, a graph's across its roles). A model is built first and
    the server of the user's it must reach, if any, asked after: once per resolver, and
    for a chain's members in order until one is ready.

    Raises:
        ModelSpecError: for a bad rate limit or a cache file that cannot be opened.
    """

    def __init__(
        self,
        *,
        timeout: float | None = DEFAULT_MODEL_TIMEOUT_S,
        max_retries: int = DEFAULT_MODEL_RETRIES,
        rate_limit: str | float | None = None,
        cache: str | Path | BaseCache | None = None,
    ) -> None:
        self.setup = ModelSetup(timeout, max_retries, rate_limit, cache)
        self.by_spec: dict[str, BaseChatModel] = {}
        self._server_of: dict[str, ModelServer | None] = {}
        self._not_answering: dict[ModelServer, ServerNotAnsweringError | None] = {}

    def resolve(self, spec: ModelSpec) -> BaseChatModel:
        """:func:`resolve_model` with this resolver's settings."""
        if isinstance(spec, str) and "," in spec:
            spec = spec.split(",")
        members = [spec] if isinstance(spec, str) or not isinstance(spec, Sequence) else spec
        # Every member is built before any server is asked: a mistake in the
        # configuration refuses a chain whatever the state of its servers.
        chain = [self._one(member) for member in members]
        if not chain:
            raise ModelSpecError(f"empty fallback chain; accepted: {ACCEPTED_SPECS}")
        self._refuse_unless_one_is_ready(members)
        return chain[0] if len(chain) == 1 else FallbackChatModel(models=chain)

    def _refuse_unless_one_is_ready(self, members: Sequence[str | BaseChatModel]) -> None:
        """Refuse ``members`` (built) unless one has no server of the user's to reach or
        its server answers. A member whose server does not answer stays in a chain: it
        may be started later, and a call moves on from it as from any member that fails
        transiently.

        Raises:
            ServerNotAnsweringError: the one member's.
            ModelSpecError: naming every member's server, when none answers.
        """
        problems: list[ServerNotAnsweringError] = []
        for member in members:
            server = self._server_of[member.strip()] if isinstance(member, str) else None
            problem = self._not_answering_at(server) if server is not None else None
            if problem is None:
                return
            problems.append(problem)
        if len(problems) == 1:
            raise problems[0]
        numbered = "; ".join(f"({n}) {problem}" for n, problem in enumerate(problems, 1))
        raise ModelSpecError(f"no model of the fallback chain is ready: {numbered}")

    def _not_answering_at(self, server: ModelServer) -> ServerNotAnsweringError | None:
        """Why ``server`` does not answer, if it does not (asked once per resolver)."""
        if server not in self._not_answering:
            try:
                server.check()
            except ServerNotAnsweringError as exc:
                self._not_answering[server] = exc
            else:
                self._not_answering[server] = None
        return self._not_answering[server]

    def _one(self, spec: str | BaseChatModel) -> BaseChatModel:
        if isinstance(spec, BaseChatModel):
            return spec
        if not isinstance(spec, str):
            raise ModelSpecError(
                f"expected a model spec string or a BaseChatModel, got {type(spec).__name__}; "
                f"accepted: {ACCEPTED_SPECS}"
            )
        key = spec.strip()
        if key not in self.by_spec:
            provider = key.partition(":")[0].strip().lower()
            model, self._server_of[key] = _built_model(spec, self.setup)
            self.by_spec[key] = self.setup.applied(model, provider)
        return self.by_spec[key]


def _built_model(spec: str, setup: ModelSetup) -> tuple[BaseChatModel, ModelServer | None]:
    """The model ``spec`` names, and the server of the user's it must reach, if any (not
    yet asked)."""
    timeout, max_retries = setup.timeout, setup.max_retries
    text = spec.strip()
    provider, sep, name = text.partition(":")
    provider = provider.strip().lower()
    name = name.strip()

    if provider == "local":
        from aimegraph.models.local import load_local_model

        if sep and not name:
            raise ModelSpecError("empty path in 'local:'; use 'local' for the bundled model")
        return (load_local_model(model_path=name) if name else load_local_model()), None

    if not sep:
        hint = did_you_mean(provider, ("local",))
        raise ModelSpecError(f"unknown model spec {spec!r}{hint}; accepted: {ACCEPTED_SPECS}")
    if not name:
        raise ModelSpecError(f"empty model name in {spec!r}; e.g. 'openai:gpt-4o-mini'")
    if provider == "openai":
        return _openai_model(name, timeout=timeout, max_retries=max_retries)
    if provider == "scripted":
        return _scripted_model(name), None
    try:
        return provider_model(provider, name, text, timeout=timeout, max_retries=max_retries)
    except UnknownProviderError as exc:
        hint = did_you_mean(provider, (*builtin_providers(), "local", "scripted"))
        raise ModelSpecError(f"{exc}{hint}; accepted: {ACCEPTED_SPECS}") from exc


def check_goal(spec: str | BaseChatModel | None, goal: str, earlier: Sequence[str] = ()) -> None:
    """Refuse up front a goal the model would refuse at its first prompt: a scripted
    scenario plays only the goals it was written for (``earlier``: the thread's
    earlier requests, which a follow-up's goal must follow). Other models take any
    goal. A front end calls this before it stores anything, to say so in one line.

    Raises:
        ScenarioGoalError: the scenario does not play ``goal`` after ``earlier``.
    """
    from aimegraph.models.offline.scripted import ScriptedChatModel

    if isinstance(spec, str):
        provider, _, name = spec.strip().partition(":")
        if provider.strip().lower() != "scripted" or not name.strip():
            return
        spec = _scripted_model(name.strip())
    if isinstance(spec, ScriptedChatModel):
        spec.scenario.turn_for(goal, "\n".join(earlier))


def supports_tool_calling(model: BaseChatModel) -> bool:
    """Whether ``model`` has native tool calling, for ``tool_calling="auto"``.

    True when its class overrides ``bind_tools`` (``BaseChatModel.bind_tools`` raises
    ``NotImplementedError``). The exception is ``ChatLlamaCpp``: its ``bind_tools`` only
    works with a forced ``tool_choice`` (one named function, grammar-constrained); with free
    choice the tools are ignored and the model never emits a tool call, so an actor would
    never call its tools. It is reported as not supporting tool calling, so ``"auto"`` picks
    the JSON mode for it (``"native"`` can still be asked for explicitly).
    """
    if isinstance(model, FallbackChatModel):
        return all(supports_tool_calling(member) for member in model.models)
    cls = type(model)
    if getattr(cls, "bind_tools", None) is getattr(BaseChatModel, "bind_tools", None):
        return False
    return not decodes_forced_calls_by_grammar(model)


def decodes_forced_calls_by_grammar(model: BaseChatModel) -> bool:
    """Whether a forced single-function call of ``model`` is decoded under a grammar built
    from the function's schema, so the reply always parses: ``ChatLlamaCpp`` (llama.cpp),
    whose free tool choice is ignored (see :func:`supports_tool_calling`)."""
    if isinstance(model, FallbackChatModel):
        return all(decodes_forced_calls_by_grammar(member) for member in model.models)
    return any(base.__name__ == "ChatLlamaCpp" for base in type(model).__mro__)


def supports_structured_output(model: BaseChatModel) -> bool:
    """Whether ``model.with_structured_output`` can work (natively, not by prompting).

    ``BaseChatModel.with_structured_output`` is built on ``bind_tools``, so this is True
    when the class overrides either of them. Unlike :func:`supports_tool_calling` it is True
    for ``ChatLlamaCpp``, whose forced single-function call is grammar-constrained JSON.
    """
    if isinstance(model, FallbackChatModel):
        return all(supports_structured_output(member) for member in model.models)
    cls = type(model)
    return any(
        getattr(cls, name, None) is not getattr(BaseChatModel, name, None)
        for name in ("bind_tools", "with_structured_output")
    )


def _openai_model(
    name: str, *, timeout: float | None, max_retries: int
) -> tuple[BaseChatModel, ModelServer | None]:
    from langchain_openai import ChatOpenAI

    api_key = _env("OPENAI_API_KEY")
    base_variable = next((v for v in ("OPENAI_BASE_URL", "OPENAI_API_BASE") if _env(v)), None)
    base_url = _env(base_variable) if base_variable else None
    if api_key is None and base_url is None:
        raise ModelSpecError(
            "set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)"
        )
    server = None
    if api_key is None and base_url is not None:  # a server of the user's: it must be up
        server = ModelServer.at(f"openai:{name}", base_url, base_variable)
    kwargs: dict[str, Any] = {
        "model": name,
        "timeout": timeout,
        "max_retries": max_retries,
        # Usage chunk when streaming too, so usage_metadata (token budgets) is always filled.
        "stream_usage": True,
        "api_key": api_key or PLACEHOLDER_API_KEY,
    }
    if base_url is not None:
        kwargs["base_url"] = base_url
    return ChatOpenAI(**kwargs), server


def _scripted_model(scenario: str) -> BaseChatModel:
    try:
        from aimegraph.models.offline.scripted import ScriptedChatModel
    except ImportError as exc:  # pragma: no cover - the module ships with the package
        raise ModelSpecError(f"scripted models are unavailable: {exc}") from exc
    try:
        model: BaseChatModel = ScriptedChatModel.from_scenario(scenario)
    except ModelSpecError:
        raise
    except (LookupError, OSError, ValueError) as exc:
        raise ModelSpecError(f"cannot load scripted scenario {scenario!r}: {exc}") from exc
    return model


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None
