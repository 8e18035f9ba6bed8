"""Whether a model built from a spec can answer, checked when the spec is resolved, so a
front end refuses it in one line before it stores a thread (rather than after its first
call fails with the client's connection error).

- A class that reads an API key (its ``lc_secrets``: field name -> environment variable,
  LangChain's own declaration) must have one, unless a base URL set in the environment
  sends it to a server of the user's (a gateway, a proxy, an OpenAI-compatible server),
  which is then checked as a keyless one is. Classes that also take credentials another
  way (a ``credentials...`` field: boto3's and Google's own credential chains) are left to
  their SDK.
- A class that reads no key (Ollama) talks to a server the user runs: a short TCP connect
  to its address, which the line names with the variable that sets it.

Nothing here sends a request to a model or reads a response: the connect only proves
something listens. A missing key refuses a model as it is built; its server
(:class:`ModelServer`) is connected to by the resolver afterwards, so that a fallback
chain keeps a member whose server is down (:class:`ServerNotAnsweringError`) while
another member is ready.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from aimegraph.models.errors import ModelSpecError

__all__ = [
    "CONNECT_TIMEOUT_S",
    "PROVIDER_KEY_VARIABLES",
    "SERVER_VARIABLES",
    "ModelServer",
    "ServerNotAnsweringError",
    "check_provider_key",
    "server_to_reach",
]

CONNECT_TIMEOUT_S = 3.0
"""How long the TCP connect to a model server may take (one on this machine answers at
once, listening or not)."""

SERVER_VARIABLES: dict[str, str] = {"ollama": "OLLAMA_HOST"}
"""The variable a keyless provider's client reads its server's address from, where its
LangChain class has no field for it (``ollama``'s client reads ``OLLAMA_HOST``)."""

PROVIDER_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "langsmith": ("LANGSMITH_GATEWAY_API_KEY", "LANGSMITH_API_KEY"),
}
"""Keys a provider reads that its class does not declare: ``init_chat_model``'s
``langsmith`` provider is ``ChatOpenAI`` sent to the LangSmith gateway with one of these
(without one it would send ``OPENAI_API_KEY`` there)."""

_KEY_SUFFIXES = ("_KEY", "_APIKEY", "_TOKEN")
"""How the variables of keys and tokens end, as against a class's other secrets
(``ANTHROPIC_MCP_SERVERS``, ``WATSONX_URL``)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def check_provider_key(provider: str, spec: str) -> None:
    """Refuse a provider of :data:`PROVIDER_KEY_VARIABLES` none of whose keys is set
    (before its model is built: its class would take another key).

    Raises:
        ModelSpecError: naming the variables.
    """
    variables = PROVIDER_KEY_VARIABLES.get(provider, ())
    if variables and not any(os.environ.get(name, "").strip() for name in variables):
        raise ModelSpecError(f"model {spec!r} needs an API key: set {' or '.join(variables)}")


class ServerNotAnsweringError(ModelSpecError):
    """Nothing accepts a connection at ``server``: a state that may pass (the server is
    started later), unlike a spec's other refusals, which are mistakes in its
    configuration."""

    def __init__(self, message: str, server: ModelServer) -> None:
        super().__init__(message)
        self.server = server


@dataclass(frozen=True)
class ModelServer:
    """The server of the user's that the model built from ``spec`` sends its requests
    to (its address set by the environment variable ``variable``, when known)."""

    spec: str
    host: str
    port: int
    variable: str | None = None

    @classmethod
    def at(cls, spec: str, url: str, variable: str | None) -> ModelServer:
        """The server at ``url``'s host and port (a bare ``host:port`` too).

        Raises:
            ModelSpecError: for a port that is not a number.
        """
        address = urlsplit(url if "//" in url else f"http://{url}")
        try:
            port = address.port or _DEFAULT_PORTS.get(address.scheme, 80)
        except ValueError as exc:
            raise ModelSpecError(f"model {spec!r}: bad server address {url!r} ({exc})") from exc
        return cls(spec, address.hostname or "127.0.0.1", port, variable)

    @property
    def address(self) -> str:
        """``host:port`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def check(self) -> None:
        """Refuse the model when nothing accepts a TCP connection at the server.

        Raises:
            ServerNotAnsweringError: naming the address and the variable that sets it.
        """
        try:
            with socket.create_connection(
                (_connectable(self.host), self.port), timeout=CONNECT_TIMEOUT_S
            ):
                return
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            fix = (
                f"start it, or set {self.variable} to its address" if self.variable else "start it"
            )
            raise ServerNotAnsweringError(
                f"model {self.spec!r}: no server answers at {self.address} ({reason}); {fix}",
                self,
            ) from exc


def server_to_reach(model: BaseChatModel, spec: str, provider: str) -> ModelServer | None:
    """Refuse ``model`` (built from ``spec``) when it has no API key; else the server of
    the user's it must reach, if any, for its caller to check (see the module's
    docstring).

    Raises:
        ModelSpecError: one line naming the key's variable, or a server address whose
            port is not a number.
    """
    keys = _key_fields(model)
    if keys and (_has_a_key(model, keys) or _has_credential_chain(model)):
        return None
    url = _server_url(model)
    variable = _variable_holding(url) if url else None
    if keys and variable is None:  # the provider's own API, and no key for it
        raise ModelSpecError(
            f"model {spec!r} needs an API key: set {' or '.join(dict.fromkeys(keys.values()))}"
        )
    if url is None:
        return None
    return ModelServer.at(spec, url, variable or SERVER_VARIABLES.get(provider))


def _key_fields(model: BaseChatModel) -> dict[str, str]:
    """The class's secret fields that hold keys or tokens, with their variables; all its
    secret fields when none is named so."""
    secrets: Mapping[str, str] = model.lc_secrets
    keys = {field: env for field, env in secrets.items() if env.endswith(_KEY_SUFFIXES)}
    return keys or dict(secrets)


def _has_a_key(model: BaseChatModel, keys: Mapping[str, str]) -> bool:
    for field in keys:
        value = getattr(model, field, None)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str) and value.strip():
            return True
        if value is not None and not isinstance(value, str):  # a token provider, a mapping
            return True
    return False


def _has_credential_chain(model: BaseChatModel) -> bool:
    """Whether the class takes credentials besides its keys (boto3's profiles and
    roles, Google's default credentials), which its SDK finds without a variable."""
    return any("credentials" in name for name in type(model).model_fields)


def _server_url(model: BaseChatModel) -> str | None:
    """The base URL the model sends requests to: its ``base_url`` field (by name or
    alias), else the base URL of the HTTP client it built (Ollama's class leaves the
    field empty and its client reads ``OLLAMA_HOST``)."""
    for name, field in type(model).model_fields.items():
        if "base_url" in (name, field.alias):
            value = getattr(model, name, None)
            if isinstance(value, str) and value.strip():
                return value.strip()
    client = getattr(model, "_client", None)
    for holder in (client, getattr(client, "_client", None)):
        base = getattr(holder, "base_url", None)
        if base is not None and str(base).strip():
            return str(base).strip()
    return None


def _variable_holding(url: str) -> str | None:
    """The environment variable whose value is ``url``: the user set the address there."""
    wanted = url.rstrip("/")
    for name, value in os.environ.items():
        if value.strip().rstrip("/") == wanted:
            return name
    return None


def _connectable(host: str) -> str:
    """A wildcard address (a server's listen address, as OLLAMA_HOST=0.0.0.0 is often
    set) connects to this machine."""
    try:
        return "127.0.0.1" if ipaddress.ip_address(host).is_unspecified else host
    except ValueError:  # a name
        return host
