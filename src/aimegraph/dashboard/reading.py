"""The dashboard's reading routes: the threads and run pages (served with their
state, see :mod:`aimegraph.dashboard.pages`), the JSON they are built from, the
plan drawing, and the event streams that keep them live by polling the
checkpointer (see :mod:`aimegraph.dashboard.feed`).

Each endpoint's docstring is its entry in the HTTP reference
(:mod:`aimegraph.dashboard.reference`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from aimegraph.checkpoints.runs import phase
from aimegraph.dashboard.operations import Operations
from aimegraph.dashboard.pages import STATIC, no_thread_page, run_page, threads_page
from aimegraph.dashboard.runs import RunManager
from aimegraph.dashboard.views import ThreadReader

__all__ = ["ThreadsApi", "no_thread"]


def no_thread(thread_id: str) -> Response:
    """The answer of a route about a thread the store does not have."""
    return JSONResponse({"error": f"no thread {thread_id!r} in this checkpoint store"}, 404)


class ThreadsApi:
    def __init__(
        self,
        reader: ThreadReader,
        runs: RunManager,
        poll_seconds: float,
        closing: threading.Event,
        operations: Operations,
    ) -> None:
        self.operations = operations
        self.reader = reader
        self.runs = runs
        self.poll_seconds = poll_seconds
        self.closing = closing

    # -- JSON

    async def threads(self, request: Request) -> Response:
        """Every thread, newest first: the threads page's data.

        Query: ``status`` (optional) keeps the threads of that status (``running``,
        ``paused``, ``stopped``, ``queued``, ``succeeded``, ``failed``, ``rejected``,
        ``budget_exhausted``, ``blocked``, ``cancelled``).

        Answers: 200 ``{"threads": [...], "active": [...], "alerts": [...]}``: a row per
        thread (``thread_id``, ``status``, ``goal``, ``updated``, ``model``, ``usage``),
        the thread ids this dashboard is running now, and the alerts as
        ``GET /api/alerts`` lists them."""
        status = request.query_params.get("status") or None
        return JSONResponse(await self._threads(status))

    async def _threads(self, status: str | None = None) -> dict[str, Any]:
        queued = await run_in_threadpool(self.runs.queued)
        rows = await run_in_threadpool(self.reader.threads, status, queued)
        return {
            "threads": rows,
            "active": sorted(self.runs.active()),
            "alerts": await run_in_threadpool(self.operations.listed),
        }

    async def run(self, request: Request) -> Response:
        """One thread's run: everything its page shows.

        That is its status (and ``reason``), goal, checklist, tasks, each task's actors
        with their transcripts, progress updates, plans, verdict, final answer (and
        ``structured_response``), usage, timeline, the pending ``interrupts`` (each with
        the ``id`` an answer may name), run settings, ``holder`` (the process running
        it, if any), ``active`` (run by this dashboard) and ``error`` (how this
        dashboard's run of it failed, if it did).

        Answers: 200 the run as JSON; 404 ``{"error": "no thread 'ID' in this checkpoint
        store"}``."""
        thread_id = request.path_params["thread_id"]
        view = await self._run(thread_id)
        if view is None:
            return no_thread(thread_id)
        return JSONResponse(view)

    async def _run(self, thread_id: str, version: str | None = None) -> dict[str, Any] | None:
        view = await run_in_threadpool(self.reader.run, thread_id, version)
        if view is None:
            return None
        holder = await self._holder(thread_id)
        status = view["status"]
        return {
            **view,
            # A run that has not ended is live only while a process holds its lease.
            "status": phase(status, live=holder is not None) if status == "running" else status,
            "holder": holder,
            "active": thread_id in self.runs.active(),
            "error": self.runs.errors.get(thread_id),
        }

    async def _holder(self, thread_id: str) -> str | None:
        holders = await run_in_threadpool(self.reader.holders, [thread_id])
        return holders.get(thread_id)

    async def _starting(self, thread_id: str) -> bool:
        """A run is starting on a thread with no checkpoint yet: here (or it failed
        here before writing one), in another process, or queued for the workers."""
        if thread_id in self.runs.active() or thread_id in self.runs.errors:
            return True
        if await self._holder(thread_id) is not None:
            return True
        queued = await run_in_threadpool(self.runs.queued)
        return any(run.thread_id == thread_id for run in queued)

    async def plan_svg(self, request: Request) -> Response:
        """The run's plan as an SVG drawing: its task DAG coloured by status.

        Answers: 200 ``image/svg+xml``; 404 ``{"error": "no thread 'ID' in this
        checkpoint store"}``; 501 when the dashboard cannot draw (no ``[draw]`` extra or
        no Graphviz ``dot``)."""
        thread_id = request.path_params["thread_id"]
        tasks = await run_in_threadpool(self.reader.tasks, thread_id)
        if tasks is None:
            return no_thread(thread_id)
        try:
            from aimegraph.drawing import draw_plan

            drawing = await run_in_threadpool(draw_plan, tasks, format="svg")
        except (ImportError, RuntimeError) as exc:  # the [draw] extra or `dot` is missing
            return JSONResponse({"error": f"no drawing: {exc}"}, 501)
        return Response(drawing.text, media_type="image/svg+xml")

    # -- pages: their state in the HTML, then live

    async def threads_page(self, request: Request) -> Response:
        """The threads page (HTML), served with its rows; its script follows
        ``GET /api/events`` and starts runs.

        Query: ``status`` (optional) filters the rows as ``GET /api/threads`` does.

        Answers: 200 HTML."""
        data = await self._threads()
        status = request.query_params.get("status") or None
        return HTMLResponse(threads_page(STATIC / "threads.html", data, status))

    async def run_page(self, request: Request) -> Response:
        """A run's page (HTML).

        Served with the run as ``GET /api/threads/{thread_id}`` gives it; its script
        follows the run's event stream and sends the answers, notes, cancels and
        ratings. A run starting on a new thread has its page before its first
        checkpoint.

        Answers: 200 HTML; 404 an HTML page saying there is no such thread."""
        thread_id = request.path_params["thread_id"]
        view = await self._run(thread_id)
        if view is None and not await self._starting(thread_id):
            return HTMLResponse(no_thread_page(STATIC / "no-thread.html", thread_id), 404)
        return HTMLResponse(run_page(STATIC / "run.html", thread_id, view))

    # -- live

    async def threads_events(self, request: Request) -> Response:
        """The threads list, live.

        An event ``threads`` with the data of ``GET /api/threads`` at once and whenever
        it changes (looked at every half second at most).

        Answers: 200 ``text/event-stream``, until the client or the dashboard stops."""

        async def stream() -> AsyncIterator[dict[str, str]]:
            last = None
            while not self.closing.is_set():
                data = await self._threads()
                text = json.dumps(data)
                if text != last:
                    last = text
                    yield {"event": "threads", "data": text}
                await asyncio.sleep(max(self.poll_seconds, 0.5))

        return EventSourceResponse(stream(), ping=15)

    async def run_events(self, request: Request) -> Response:
        """A run, live.

        An event ``run`` with the data of ``GET /api/threads/{thread_id}`` as soon as the
        thread has a checkpoint, then whenever anything in it changes (a checkpoint in
        any namespace, a pending write, its holder, this dashboard's error), looked at
        every 100 ms by default.

        Answers: 200 ``text/event-stream``, until the client or the dashboard stops;
        404 ``{"error": "no thread 'ID' in this checkpoint store"}`` for a thread with no
        checkpoint and no run starting on it."""
        thread_id = request.path_params["thread_id"]
        known = await run_in_threadpool(self.reader.version, thread_id)
        if known is None and not await self._starting(thread_id):
            return no_thread(thread_id)

        async def stream() -> AsyncIterator[dict[str, str]]:
            last: tuple[str | None, str | None, str | None] | None = None
            while not self.closing.is_set():
                version = await run_in_threadpool(self.reader.version, thread_id)
                state = (version, await self._holder(thread_id), self.runs.errors.get(thread_id))
                if state != last and version is not None:
                    view = await self._run(thread_id, version)
                    if view is not None:
                        last = state
                        yield {"event": "run", "data": json.dumps(view)}
                await asyncio.sleep(self.poll_seconds)

        return EventSourceResponse(stream(), ping=15)
