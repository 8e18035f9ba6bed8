"""aimegraph as an MCP server (``aimegraph mcp serve``), on ``mcp``'s FastMCP, over
stdio or streamable HTTP: Claude Desktop, Cursor or any MCP client hands a goal to
aimegraph, follows it, answers the human it waits for, or cancels it.

Tools (each run is a thread, ``mcp-...``):

- ``start_run(goal, config?)``: start a run; its thread id.
- ``run_status(thread_id)``: the run now (status, progress checklist, the interrupts
  it waits on, final answer, reason).
- ``wait_for_run(thread_id, timeout_s)``: wait until it pauses for a human or ends,
  reporting each step's progress list as MCP progress notifications when the
  client asks for them (a progress token).
- ``answer(thread_id, decision, interrupt_id?)``: answer what it waits for
  (``{"action": "approve" | "reject" | "edit", ...}``, ``{"answer": text}``, or
  LangChain's ``{"decisions": [...]}``); it carries on.
- ``cancel_run(thread_id)``: end it as ``cancelled``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from starlette.types import ASGIApp

from aimegraph.checkpoints import new_thread_id
from aimegraph.serving.runs import CALLER_ERRORS, RunView, ServedRuns
from aimegraph.serving.security import BearerTokenMiddleware

__all__ = ["create_mcp_server", "mcp_http_app"]

INSTRUCTIONS = (
    "aimegraph plans a goal as a task DAG, runs the tasks with tool-using agents and "
    "verifies the answer. start_run returns a thread id; wait_for_run follows the run "
    "until it ends or waits for a human (status 'paused', see 'interrupts'); answer "
    "what it waits for with answer, then wait again; cancel_run ends it."
)


def create_mcp_server(runs: ServedRuns, host: str = "127.0.0.1") -> FastMCP[Any]:
    """The MCP server over ``runs``; ``host`` is where its HTTP transport will
    listen (a loopback one turns on FastMCP's DNS rebinding protection)."""
    server: FastMCP[Any] = FastMCP("aimegraph", instructions=INSTRUCTIONS, host=host)

    async def steer(call: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(call, *args)
        except CALLER_ERRORS as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def start_run(goal: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a run of aimegraph on a goal; returns its thread_id. ``config`` may
        set budgets and human control (max_replans, max_llm_calls, verify,
        approve_plan, ...)."""
        thread_id = await steer(runs.start, goal, new_thread_id("mcp-"), config)
        return {"thread_id": thread_id}

    @server.tool()
    async def run_status(thread_id: str) -> dict[str, Any]:
        """The run now: status (running, paused, succeeded, failed, budget_exhausted,
        rejected, cancelled, stopped, error), its progress checklist, the
        interrupts a paused run waits on, the final answer and the reason."""
        view: RunView = await steer(runs.view, thread_id)
        return view.as_dict()

    @server.tool()
    async def wait_for_run(thread_id: str, ctx: Context, timeout_s: float = 60) -> dict[str, Any]:
        """Wait until the run pauses for a human or ends (at most ``timeout_s``
        seconds; then it is still running), with its progress as notifications;
        returns the run as run_status does."""
        since = await steer(runs.head, thread_id)
        now: RunView = await steer(runs.view, thread_id)

        async def progress(step: RunView) -> None:
            await ctx.report_progress(step.done, step.total or None, step.checklist)

        if now.checklist:  # where it is, then each step from here
            await progress(now)
        view = await runs.follow(
            thread_id, progress, since=since, timeout=timeout_s, shown=now.checklist
        )
        return view.as_dict()

    @server.tool()
    async def answer(
        thread_id: str, decision: dict[str, Any], interrupt_id: str | None = None
    ) -> dict[str, Any]:
        """Answer what a paused run waits for: {"action": "approve"}, {"action":
        "reject", "reason": ...}, {"action": "edit", "plan" | "args": ...}, or
        {"answer": text} (a question, an escalation); all its interrupts, or the
        one ``interrupt_id`` names. The run carries on: wait_for_run follows it."""
        await steer(runs.answer, thread_id, decision, interrupt_id)
        return {"thread_id": thread_id, "status": "running"}

    @server.tool()
    async def cancel_run(thread_id: str) -> dict[str, Any]:
        """End the run as cancelled (not resumable; a live run stops at its next step)."""
        view: RunView = await steer(runs.cancel, thread_id)
        return view.as_dict()

    return server


def mcp_http_app(server: FastMCP[Any], token: str | None = None) -> ASGIApp:
    """The server's streamable HTTP app (at ``/mcp``), behind ``token`` when given."""
    app = server.streamable_http_app()
    return BearerTokenMiddleware(app, token=token) if token else app
