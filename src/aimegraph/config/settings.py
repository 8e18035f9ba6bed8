"""What every group of user-typed settings shares: unknown names refused with the
closest real one, pydantic's errors on one line; and the ``web`` bundle's settings."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = ["WebConfig", "settings_error", "unknown_setting"]


class _Settings(BaseModel):
    """Settings a user types (in JSON, YAML, a dict): a mistyped name is refused
    naming the closest real one, which pydantic's "extra inputs are not permitted"
    does not."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = [str(key) for key in data if key not in cls.model_fields]
            if unknown:
                raise ValueError(
                    "; ".join(unknown_setting(name, cls.model_fields) for name in unknown)
                )
        return data


def unknown_setting(name: str, known: Mapping[str, Any]) -> str:
    """``name`` refused as no setting of ``known``, with the closest one that is."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"unknown setting {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def settings_error(exc: ValidationError) -> str:
    """A pydantic error about settings on one line: each field named with its problem
    (and the value given), without pydantic's layout and links. The same for any
    model, so a bad file of agents or systems reads as a bad ``--config`` does."""
    problems: dict[tuple[Any, ...], str] = {}
    for error in exc.errors(include_url=False):
        where = error["loc"][:1]  # a union's branches each report on the same field
        if where in problems:
            continue
        if error["type"] == "value_error":
            problem = str(error.get("ctx", {}).get("error", error["msg"]))
        else:
            problem = error["msg"][:1].lower() + error["msg"][1:]
            if "input" in error and error["type"] != "missing":
                problem += f" (got {_clip(repr(error['input']))})"
        field = ".".join(str(part) for part in error["loc"])
        problems[where] = f"setting {field!r}: {problem}" if field else problem
    return "; ".join(problems.values())


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class WebConfig(_Settings):
    """The ``web`` tool bundle's policy (``AimeConfig.web``; the bundle exists only
    when it is set). ``fetch_url`` refuses, on the first request and on every
    redirect, any URL that is not http(s), whose host a list excludes, or whose
    host resolves to any address that is not public (loopback, private,
    link-local, carrier-grade NAT, multicast, reserved) unless the host is one of
    ``allow_private_hosts``;
    it connects to the address it checked, so a DNS answer cannot change between
    the check and the connection."""

    allow_hosts: tuple[str, ...] = Field(
        (),
        description="Only these hosts (and their subdomains) may be fetched; empty: any "
        "public host.",
    )
    deny_hosts: tuple[str, ...] = Field(
        (), description="Hosts (and their subdomains) never fetched; wins over allow_hosts."
    )
    allow_private_hosts: tuple[str, ...] = Field(
        (),
        description="Hosts (and their subdomains) fetch_url may reach at loopback, private "
        "or link-local addresses: an intranet site, a local server ('127.0.0.1'). Every "
        "other host resolving to such an address is refused: it is how a model would reach "
        "cloud metadata endpoints and internal services (SSRF).",
    )
    timeout_s: float = Field(
        20.0, gt=0, description="Seconds for a whole fetch, redirects and body included."
    )
    max_bytes: int = Field(
        5_000_000, ge=1_000, description="Largest body read; a longer one is cut (a PDF refused)."
    )
    max_redirects: int = Field(5, ge=0, description="Redirects followed per fetch.")
    search: str | None = Field(
        None,
        description="The web_search tool: MODULE:ATTR of any LangChain search tool (an "
        "instance, or a class or function that makes one with no arguments), e.g. "
        "langchain_tavily:TavilySearch. Its own network calls are its own: the policy "
        "above covers fetch_url.",
    )
