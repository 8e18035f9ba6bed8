"""MCP server specs: the ``mcpServers`` JSON shape, read and checked without the
``[mcp]`` extra (the servers themselves are reached by :mod:`aimegraph.tools.mcp`).

A file in the shape Claude Desktop, Cursor and Claude Code share::

    {"mcpServers": {
        "notes": {"command": "python", "args": ["notes.py"], "env": {"TOKEN": "${NOTES_TOKEN}"}},
        "search": {"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Key": "${KEY}"}}
    }}

Each server becomes a tool bundle named after it. ``${VAR}`` (and ``${VAR:-default}``)
in the command, arguments, environment, working directory, URL and headers is read
from the environment when the server is reached, so secrets need not be written in the
file. Stored with a thread (``AimeConfig.mcp_servers``), literal ``env`` and
``headers`` values are masked; ``${VAR}`` references are kept.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)

__all__ = [
    "MASKED",
    "McpConfigError",
    "McpServer",
    "McpServerError",
    "McpServersArg",
    "load_mcp_servers",
]

MASKED = "**********"
"""What a literal ``env`` or ``headers`` value is stored as with a thread."""

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class McpConfigError(ValueError):
    """An MCP servers file or spec is malformed."""


class McpServerError(RuntimeError):
    """An MCP server cannot be started or reached; the message is one line naming it."""

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f"MCP server {server!r} {problem}")
        self.server = server


Transport = Literal["stdio", "http", "streamable_http", "streamable-http", "sse"]

McpServersArg = str | Path | Mapping[str, Any] | None
"""What ``build_aime_graph(mcp_servers=...)`` takes: see :func:`load_mcp_servers`."""


class McpServer(BaseModel):
    """One entry of ``mcpServers``: a local server started with ``command`` (stdio), or
    a remote one at ``url`` (streamable HTTP; ``"type": "sse"`` for the older SSE one)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = Field(
        None, repr=False, description="The server's environment (default: a safe subset)."
    )
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = Field(None, repr=False)
    transport: Transport | None = Field(None, validation_alias=AliasChoices("transport", "type"))
    description: str | None = Field(
        None, description="What the planner reads about the bundle (default: the server's own)."
    )
    timeout: float | None = Field(
        None, gt=0, description="Seconds a call of its tools may take (else tool_timeout_s)."
    )
    disabled: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (a stdio server) or 'url' (an HTTP server)")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError(f"'command' starts a stdio server; transport {self.transport!r}")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("a stdio server is started with 'command', not reached at 'url'")
        return self

    @property
    def kind(self) -> Literal["stdio", "streamable_http", "sse"]:
        if self.command is not None:
            return "stdio"
        return "sse" if self.transport == "sse" else "streamable_http"

    @field_serializer("env", "headers", when_used="json")
    def _masked(self, values: dict[str, str] | None) -> dict[str, str] | None:
        # Secrets never reach checkpoints: only ${VAR} references are stored as written.
        if values is None:
            return None
        return {k: v if _REFERENCE.search(v) else MASKED for k, v in values.items()}

    def expanded(self, name: str) -> McpServer:
        """This spec with its ``${VAR}`` references read from the environment.

        Raises:
            McpServerError: a variable is not set, or a value was masked when stored.
        """

        def expand(value: str, where: str) -> str:
            if value == MASKED:
                raise McpServerError(
                    name,
                    f"has {where} stored masked (a literal value, maybe a secret, is never "
                    "stored with a thread): write it as ${VAR} in the servers file, or give "
                    "the file again (--mcp FILE)",
                )

            def lookup(match: re.Match[str]) -> str:
                variable, default = match.group(1), match.group(2)
                found = os.environ.get(variable, default)
                if found is None:
                    raise McpServerError(name, f"needs ${{{variable}}} ({where}), which is not set")
                return found

            return _REFERENCE.sub(lookup, value)

        def each(values: dict[str, str] | None, field: str) -> dict[str, str] | None:
            if values is None:
                return None
            return {k: expand(v, f"{field} {k!r}") for k, v in values.items()}

        return self.model_copy(
            update={
                "command": expand(self.command, "command") if self.command else None,
                "args": tuple(expand(a, "args") for a in self.args),
                "env": each(self.env, "env"),
                "cwd": expand(self.cwd, "cwd") if self.cwd else None,
                "url": expand(self.url, "url") if self.url else None,
                "headers": each(self.headers, "header"),
            }
        )


def load_mcp_servers(source: McpServersArg) -> dict[str, McpServer]:
    """The enabled servers of ``source``: a JSON file's path, or its parsed content:
    ``{"mcpServers": {...}}`` (``{"servers": {...}}``, VS Code's, too) or the
    ``{name: spec}`` mapping itself, whose specs may be :class:`McpServer` already.

    Raises:
        McpConfigError: the file cannot be read or is not in this shape (one line).
    """
    if source is None:
        return {}
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise McpConfigError(f"cannot read MCP servers file {path}: {exc.strerror}") from exc
        except ValueError as exc:
            raise McpConfigError(f"MCP servers file {path} is not JSON: {exc}") from exc
        where = str(path)
    else:
        data, where = source, "mcp_servers"
    if isinstance(data, Mapping) and ("mcpServers" in data or "servers" in data):
        data = data.get("mcpServers", data.get("servers"))
    if not isinstance(data, Mapping):
        raise McpConfigError(f'{where}: expected {{"mcpServers": {{name: server, ...}}}}')
    servers: dict[str, McpServer] = {}
    for name, spec in data.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise McpConfigError(
                f"{where}: MCP server name {name!r} must be letters, digits, '_', '-' or '.' "
                "(it names the server's tool bundle)"
            )
        try:
            server = spec if isinstance(spec, McpServer) else McpServer.model_validate(spec)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors()
            )
            raise McpConfigError(f"{where}: MCP server {name!r}: {problems}") from exc
        if not server.disabled:
            servers[name] = server
    return servers
