"""The dashboard's ASGI app (Starlette): two static pages, a JSON API, and
server-sent event streams fed by polling the checkpointer.

Safety: without a token the app only answers requests addressed to a loopback
host name (a web page elsewhere cannot reach it through DNS rebinding); with a
token every request and event stream must carry it (``Authorization: Bearer``,
or the cookie set when a page is opened with ``?token=``). Changes are POSTs of
JSON from the same origin, which a foreign page cannot send without a CORS
preflight this app never grants. Every page forbids inline scripts (CSP), and
the scripts put all text in the page as text.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from aimegraph.alerts import AlertSettings
from aimegraph.answers import AnswerError, HandedOver, NoSuchInterruptError
from aimegraph.checkpoints import ThreadNotFoundError
from aimegraph.checkpoints.runs import phase
from aimegraph.config import settings_error
from aimegraph.dashboard.operations import Operations
from aimegraph.dashboard.pages import run_page, threads_page
from aimegraph.dashboard.panes import EvalsPane, MemoryPane, PromptsPane, json_body
from aimegraph.dashboard.runs import (
    NothingToResumeError,
    QueueUnavailableError,
    RunConflictError,
    RunManager,
)
from aimegraph.dashboard.tokens import TokenProblem, bearer_token, token_problem
from aimegraph.dashboard.views import ThreadReader
from aimegraph.eval.harness import DEFAULT_EVALS
from aimegraph.optimizer.store import PromptStore
from aimegraph.steering import ANSWER_KEYS

STATIC = Path(str(resources.files("aimegraph.dashboard") / "static"))
TOKEN_COOKIE = "aimegraph_token"
TOKEN_REFUSALS: dict[TokenProblem, str] = {
    "missing": "a token is required: send Authorization: Bearer TOKEN, or open a page "
    "with ?token=TOKEN",
    "wrong": "the token is wrong: it is not the one the dashboard was started with",
}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
POLL_SECONDS = 0.1
"""How often an event stream asks the checkpointer whether its thread changed."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def create_app(
    saver: BaseCheckpointSaver[Any],
    *,
    store: BaseStore | None = None,
    prompts: PromptStore | None = None,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    runs: RunManager | None = None,
    poll_seconds: float = POLL_SECONDS,
    evals: Path = DEFAULT_EVALS,
    alerts: AlertSettings | None = None,
) -> Starlette:
    """The dashboard over ``saver`` and the long-term memory ``store`` (the memory
    pane shows it, and runs started or resumed here use it, as the CLI's do); the
    prompts pane shows the ``prompts`` store's versions; the evals pane the evals
    under ``evals`` (``aimegraph eval``'s directories) and opens their reports.
    ``allowed_hosts`` are the host names requests may be addressed to (``("*",)`` to
    accept any, which needs a ``token``). ``/metrics`` serves the process's Prometheus
    metrics; the ``alerts`` rules are checked in the background and their alerts
    listed at ``/api/alerts`` and on the threads page, with those the workers of
    ``runs``' distributed queue recorded."""
    if "*" in allowed_hosts and not token:
        raise ValueError("serving every host name needs a token")
    reader = ThreadReader(saver)
    runs = runs or RunManager(saver, store=store, prompts=prompts)
    closing = threading.Event()
    operations = Operations(
        reader, alerts, runs.distributed.checkpoints if runs.distributed is not None else None
    )
    api = _Api(reader, runs, poll_seconds, closing, operations)
    memory = MemoryPane(store if store is not None else runs.store)
    prompt_pane = PromptsPane(prompts)
    eval_pane = EvalsPane(evals)
    app = Starlette(
        routes=[
            Route("/", api.threads_page),
            Route("/memory", _page("memory.html")),
            Route("/prompts", _page("prompts.html")),
            Route("/evals", _page("evals.html")),
            Route("/evals/{name}", eval_pane.report),
            Route("/threads/{thread_id:path}", api.run_page),
            Route("/api/threads", api.threads),
            Route("/api/events", api.threads_events),
            Route("/api/threads/{thread_id}", api.run),
            Route("/api/threads/{thread_id}/plan.svg", api.plan_svg),
            Route("/api/threads/{thread_id}/events", api.run_events),
            Route("/api/threads/{thread_id}/resume", api.resume, methods=["POST"]),
            Route("/api/threads/{thread_id}/cancel", api.cancel, methods=["POST"]),
            Route("/api/threads/{thread_id}/notes", api.note, methods=["POST"]),
            Route("/api/threads/{thread_id}/feedback", api.feedback, methods=["POST"]),
            Route("/api/runs", api.start, methods=["POST"]),
            Route("/api/demo", api.start_demo, methods=["POST"]),
            Route("/api/memory", memory.items),
            Route("/api/memory/forget", memory.forget, methods=["POST"]),
            Route("/api/prompts", prompt_pane.versions),
            Route("/api/prompts/use", prompt_pane.use, methods=["POST"]),
            Route("/api/prompts/{version}", prompt_pane.version),
            Route("/api/evals", eval_pane.evals),
            Route("/metrics", operations.scrape),
            Route("/api/alerts", operations.alert_list),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(_Guard, token=token),
        ],
    )
    app.state.runs = runs
    app.state.reader = reader
    app.state.closing = closing  # set it to end every event stream (before a shutdown)
    app.state.alerts = operations.alerts
    if operations.alerts is not None:
        operations.alerts.start()
    return app


def _page(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / name, media_type="text/html")

    return page


class _Guard(BaseHTTPMiddleware):
    """Token check (when set), same-origin JSON for changes, security headers."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if self.token is not None:
            offered = request.query_params.get("token")
            if offered is not None and token_problem([offered], self.token) is None:
                # Trade the token in the address for a cookie, and drop it from
                # the address bar (and so from the history and any Referer).
                rest = request.url.remove_query_params("token")
                target = rest.path + (f"?{rest.query}" if rest.query else "")
                response: Response = RedirectResponse(target, status_code=303)
                response.set_cookie(
                    TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/"
                )
                return _secured(response)
            if problem := self._token_problem(request):
                return _secured(JSONResponse({"error": TOKEN_REFUSALS[problem]}, 401))
        if request.method not in ("GET", "HEAD"):
            if request.headers.get("content-type", "").split(";")[0] != "application/json":
                return _secured(JSONResponse({"error": "send JSON"}, 415))
            origin = request.headers.get("origin")
            if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
                return _secured(JSONResponse({"error": "cross-origin request refused"}, 403))
        return _secured(await call_next(request))

    def _token_problem(self, request: Request) -> TokenProblem | None:
        assert self.token is not None
        offered = (
            request.query_params.get("token", ""),
            bearer_token(request.headers.get("authorization", "")),
            request.cookies.get(TOKEN_COOKIE, ""),
        )
        return token_problem(offered, self.token)


def _secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


class _Api:
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

    # -- reading

    async def threads(self, request: Request) -> Response:
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
        view = await self._run(request.path_params["thread_id"])
        if view is None:
            return JSONResponse({"error": "no such thread"}, 404)
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

    async def plan_svg(self, request: Request) -> Response:
        tasks = await run_in_threadpool(self.reader.tasks, request.path_params["thread_id"])
        if tasks is None:
            return JSONResponse({"error": "no such thread"}, 404)
        try:
            from aimegraph.drawing import draw_plan

            drawing = await run_in_threadpool(draw_plan, tasks, format="svg")
        except (ImportError, RuntimeError) as exc:  # the [draw] extra or `dot` is missing
            return JSONResponse({"error": f"no drawing: {exc}"}, 501)
        return Response(drawing.text, media_type="image/svg+xml")

    # -- pages: their state in the HTML, then live (see aimegraph.dashboard.pages)

    async def threads_page(self, request: Request) -> Response:
        data = await self._threads()
        status = request.query_params.get("status") or None
        return HTMLResponse(threads_page(STATIC / "threads.html", data, status))

    async def run_page(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        view = await self._run(thread_id)
        return HTMLResponse(run_page(STATIC / "run.html", thread_id, view))

    # -- live

    async def threads_events(self, request: Request) -> Response:
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
        thread_id = request.path_params["thread_id"]

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

    # -- steering

    async def start(self, request: Request) -> Response:
        body = await json_body(request)
        config = body.get("config") or {}
        if not isinstance(config, dict):
            return JSONResponse({"error": "config must be a JSON object"}, 400)
        return await self._launch(
            self.runs.start,
            goal=str(body.get("goal") or ""),
            model=str(body.get("model") or "").strip() or None,
            config=config,
            thread_id=str(body.get("thread_id") or "").strip() or None,
            response_format=str(body.get("response_format") or "").strip() or None,
        )

    async def start_demo(self, request: Request) -> Response:
        body = await json_body(request)
        return await self._launch(
            self.runs.start_demo,
            approve_plan=bool(body.get("approve_plan")),
            thread_id=str(body.get("thread_id") or "").strip() or None,
        )

    async def resume(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        body = await json_body(request)
        answer = {k: body[k] for k in ANSWER_KEYS if k in body}
        interrupt_id = body.get("interrupt_id") or None
        return await self._launch(
            self.runs.resume, thread_id, answer or None, interrupt_id, thread=thread_id
        )

    async def cancel(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        try:
            outcome = await run_in_threadpool(self.runs.cancel, thread_id)
        except (ThreadNotFoundError, NothingToResumeError) as exc:
            return JSONResponse({"error": str(exc)}, 404)
        except QueueUnavailableError as exc:
            return JSONResponse({"error": str(exc)}, 503)
        except ValidationError as exc:  # a config with a typo or a bad value
            return JSONResponse({"error": settings_error(exc)}, 400)
        return JSONResponse({"thread_id": thread_id, "status": outcome}, 202)

    async def note(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        body = await json_body(request)
        try:
            await run_in_threadpool(self.runs.note, thread_id, str(body.get("text") or ""))
        except ThreadNotFoundError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse({"thread_id": thread_id}, 202)

    async def feedback(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        body = await json_body(request)
        rating, note = body.get("rating"), str(body.get("note") or "")
        if not isinstance(rating, int) or isinstance(rating, bool):
            return JSONResponse({"error": "rating must be a whole number from 1 to 5"}, 400)
        try:
            verdict = await run_in_threadpool(self.runs.feedback, thread_id, rating, note)
        except ThreadNotFoundError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        except ValidationError as exc:
            return JSONResponse({"error": settings_error(exc)}, 400)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse(verdict.model_dump(mode="json"), 201)

    async def _launch(
        self, call: Callable[..., Any], *args: Any, thread: str | None = None, **kwargs: Any
    ) -> Response:
        try:
            result = await run_in_threadpool(call, *args, **kwargs)
        except (ThreadNotFoundError, NoSuchInterruptError, NothingToResumeError) as exc:
            return JSONResponse({"error": str(exc)}, 404)
        except RunConflictError as exc:
            return JSONResponse({"error": str(exc)}, 409)
        except QueueUnavailableError as exc:
            return JSONResponse({"error": str(exc)}, 503)
        except ValidationError as exc:  # a config with a typo or a bad value
            return JSONResponse({"error": settings_error(exc)}, 400)
        except (AnswerError, ValueError) as exc:  # bad answers, configs, model specs
            return JSONResponse({"error": str(exc)}, 400)
        if isinstance(result, str):  # a new run's thread id
            return JSONResponse({"thread_id": result}, 202)
        if isinstance(result, HandedOver):  # to the process waiting on the answer
            handed = {"thread_id": thread, "queued": False, "handed_to": result.holder}
            return JSONResponse(handed, 202)
        # A resume: True when it was queued for the distributed workers.
        return JSONResponse({"thread_id": thread, "queued": bool(result)}, 202)
