"""Tools served over the Model Context Protocol, one bundle per server (extra ``[mcp]``).

When a graph is built, each server is reached once, briefly, to list its tools; they
become LangChain tools through ``langchain-mcp-adapters`` (schemas, content blocks, a
tool error as an error observation) in a bundle named after the server. During a run,
a server's calls share one session, opened on its first call and kept on the engine
loop in the run's scope (:mod:`aimegraph.running.scope`), which closes it when the run
ends, is cancelled or crashes; a stdio server's process ends with it. A server that
cannot start is one line naming it (:class:`McpServerError`): at build time an error,
during a run each call's error observation; so is a server that stops answering.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import IO, TextIO, cast

import anyio
from langchain_core.tools import BaseTool, ToolException

try:
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult
    from langchain_mcp_adapters.sessions import Connection, create_session
    from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import InitializeResult
    from mcp.types import Tool as McpTool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        f"MCP servers need the [mcp] extra: pip install 'aimegraph[mcp]' ({exc})"
    ) from exc

from aimegraph.mcp_servers import McpServer, McpServerError
from aimegraph.running.loop import engine_loop
from aimegraph.running.scope import RunScope, current_scope
from aimegraph.tools.policy import with_policy
from aimegraph.tools.registry import ToolRegistry, first_sentence

__all__ = ["McpBundle", "add_mcp_bundles", "load_mcp_bundles", "open_session"]

START_TIMEOUT_S = 30.0
"""Seconds a server gets to start and answer the MCP handshake."""

_DESCRIPTION_CHARS = 300


@dataclass(frozen=True)
class McpBundle:
    """A server's tools as a bundle: its name, what the planner reads, its tools."""

    name: str
    description: str
    tools: tuple[BaseTool, ...]


def add_mcp_bundles(registry: ToolRegistry, servers: Mapping[str, McpServer]) -> ToolRegistry:
    """``registry`` with one bundle per server added (see :func:`load_mcp_bundles`)."""
    for bundle in load_mcp_bundles(servers, taken=registry.tools):
        registry.add_bundle(bundle.name, bundle.description, bundle.tools)
    return registry


def load_mcp_bundles(
    servers: Mapping[str, McpServer], *, taken: Collection[str] = ()
) -> list[McpBundle]:
    """Reach every server at once (a short session each, on the engine loop) and
    return its tools as a bundle. A tool whose name another server's tool or one of
    ``taken`` already has is named ``<server>_<tool>``.

    Raises:
        McpServerError: a server cannot start or answer (the first one, by name).
    """
    if not servers:
        return []
    listed = engine_loop().run(_list_all(servers), timeout=START_TIMEOUT_S + 5)
    counts: dict[str, int] = {}
    for _, tools in listed.values():
        for tool in tools:
            counts[tool.name] = counts.get(tool.name, 0) + 1
    bundles = []
    for name, server in servers.items():
        init, tools = listed[name]
        through_run = _ThroughRunSession(name, server)
        connection = _connection(server.expanded(name))
        converted = [
            convert_mcp_tool_to_langchain_tool(
                None,
                tool,
                connection=connection,
                tool_interceptors=[through_run],
                server_name=name,
                tool_name_prefix=counts[tool.name] > 1 or tool.name in taken,
            )
            for tool in tools
        ]
        if server.timeout is not None:
            converted = [with_policy(t, timeout_s=server.timeout) for t in converted]
        bundles.append(McpBundle(name, _describe(name, server, init, tools), tuple(converted)))
    return bundles


async def _list_all(
    servers: Mapping[str, McpServer],
) -> dict[str, tuple[InitializeResult, list[McpTool]]]:
    names = list(servers)
    listed = await asyncio.gather(
        *(_list(name, servers[name]) for name in names), return_exceptions=True
    )
    for outcome in listed:
        if isinstance(outcome, BaseException):
            raise outcome
    return dict(zip(names, listed, strict=True))  # type: ignore[arg-type]


async def _list(name: str, server: McpServer) -> tuple[InitializeResult, list[McpTool]]:
    async with open_session(name, server) as (session, init):
        tools: list[McpTool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                while True:
                    page = await session.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.nextCursor
                    if not cursor:
                        return init, tools
        except Exception as exc:
            raise McpServerError(name, f"could not list its tools: {_start_reason(exc)}") from exc


@asynccontextmanager
async def open_session(
    name: str, server: McpServer
) -> AsyncIterator[tuple[ClientSession, InitializeResult]]:
    """An initialized session with the server (started, for a stdio one: its process
    ends when the session closes). A stdio server's stderr is kept aside; its last
    line tells why a server that failed to start failed.

    Raises:
        McpServerError: the server cannot start or does not answer the handshake.
    """
    spec = server.expanded(name)
    started = False
    # File work in a worker thread: the engine loop, like any event loop, must not
    # block (LangGraph Server's dev mode refuses blocking calls on every loop).
    errlog = await asyncio.to_thread(
        tempfile.TemporaryFile, "w+", encoding="utf-8", errors="replace"
    )
    with errlog:
        try:
            async with _transport(spec, errlog) as session:
                with anyio.fail_after(START_TIMEOUT_S):
                    init = await session.initialize()
                started = True
                yield session, init
        except Exception as exc:
            if started:
                raise
            last_words = await asyncio.to_thread(_last_words, errlog)
            problem = f"could not start: {_start_reason(exc)}{last_words}"
            raise McpServerError(name, problem) from exc


@asynccontextmanager
async def _transport(server: McpServer, errlog: IO[str]) -> AsyncIterator[ClientSession]:
    if server.kind == "stdio":
        assert server.command is not None
        params = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
        )
        async with (
            stdio_client(params, errlog=cast(TextIO, errlog)) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session
    else:
        async with create_session(_connection(server)) as session:
            yield session


def _connection(server: McpServer) -> Connection:
    """The adapter's connection for an expanded spec: how a call outside an aimegraph
    run (no run scope) reaches the server, with a session of its own."""
    if server.kind == "stdio":
        assert server.command is not None
        return {
            "transport": "stdio",
            "command": server.command,
            "args": list(server.args),
            "env": server.env,
            "cwd": server.cwd,
        }
    assert server.url is not None
    if server.kind == "sse":
        return {"transport": "sse", "url": server.url, "headers": server.headers}
    return {"transport": "streamable_http", "url": server.url, "headers": server.headers}


class _ThroughRunSession:
    """The adapter's tool-call interceptor sending a call through the run's session
    with its server (opened on the run's first call). Outside a run, the adapter's own
    way: a session for the call. A failure of the server is a ``ToolException`` naming
    it, so the actor gets it as an error observation."""

    def __init__(self, name: str, server: McpServer) -> None:
        self.name = name
        self.server = server

    async def __call__(
        self,
        request: MCPToolCallRequest,
        handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]],
    ) -> MCPToolCallResult:
        scope = current_scope()
        if scope is None:
            result: MCPToolCallResult = await handler(request)
            return result
        try:
            return await scope.arun(self._call(scope, request))
        except McpServerError as exc:
            raise ToolException(str(exc)) from exc
        except Exception as exc:
            raise ToolException(
                f"MCP server {self.name!r} failed on {request.name}: {_reason(exc)}"
            ) from exc

    async def _call(self, scope: RunScope, request: MCPToolCallRequest) -> MCPToolCallResult:
        session, _ = await scope.resource(("mcp", self.name), self._open)
        return await session.call_tool(request.name, request.args)

    def _open(self) -> AbstractAsyncContextManager[tuple[ClientSession, InitializeResult]]:
        return open_session(self.name, self.server)


def _describe(name: str, server: McpServer, init: InitializeResult, tools: list[McpTool]) -> str:
    """What the planner reads about the bundle: the spec's description, else the
    server's instructions, else the first sentence of each tool's description."""
    if server.description:
        return server.description
    if init.instructions and init.instructions.strip():
        text = " ".join(init.instructions.split())
    else:
        firsts = [first_sentence(t.description or t.name).rstrip(".") for t in tools]
        text = f"Tools of the MCP server {name}: " + "; ".join(firsts) + "."
    return text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 3] + "..."


def _reason(exc: BaseException) -> str:
    """One line for ``exc``: what went wrong (see :func:`_leaf`), its message, or its
    type when it has none."""
    exc = _leaf(exc)
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
        return "its connection is closed (the server stopped, or dropped it)"
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _start_reason(exc: BaseException) -> str:
    """:func:`_reason`, where a timeout is the start's (``START_TIMEOUT_S``)."""
    if isinstance(_leaf(exc), TimeoutError):
        return f"no answer within {START_TIMEOUT_S:g} s"
    return _reason(exc)


def _last_words(errlog: IO[str]) -> str:
    """The last line the server wrote to stderr, as a suffix for an error message."""
    try:
        errlog.seek(0)
        lines = [line.strip() for line in errlog.read()[-4000:].splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return f" (its stderr: {lines[-1][:300]})" if lines else ""
