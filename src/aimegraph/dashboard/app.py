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

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from aimegraph.alerts import AlertSettings
from aimegraph.answers import AnswerError, HandedOver, NoSuchInterruptError
from aimegraph.checkpoints import ThreadNotFoundError
from aimegraph.config import settings_error
from aimegraph.dashboard.operations import Operations
from aimegraph.dashboard.pages import STATIC
from aimegraph.dashboard.panes import EvalsPane, MemoryPane, PromptsPane, json_body
from aimegraph.dashboard.reading import ThreadsApi
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
    reads = ThreadsApi(reader, runs, poll_seconds, closing, operations)
    api = _Api(runs)
    memory = MemoryPane(store if store is not None else runs.store)
    prompt_pane = PromptsPane(prompts)
    eval_pane = EvalsPane(evals)
    app = Starlette(
        routes=[
            Route("/", reads.threads_page),
            Route("/memory", _page("memory.html", MEMORY_PAGE)),
            Route("/prompts", _page("prompts.html", PROMPTS_PAGE)),
            Route("/evals", _page("evals.html", EVALS_PAGE)),
            Route("/evals/{name}", eval_pane.report),
            Route("/threads/{thread_id:path}", reads.run_page),
            Route("/api/threads", reads.threads),
            Route("/api/events", reads.threads_events),
            Route("/api/threads/{thread_id}", reads.run),
            Route("/api/threads/{thread_id}/plan.svg", reads.plan_svg),
            Route("/api/threads/{thread_id}/events", reads.run_events),
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


MEMORY_PAGE = """The memory pane (HTML): the episodes and lessons of a scope; its script
reads ``GET /api/memory`` and forgets through ``POST /api/memory/forget``.

Answers: 200 HTML."""
PROMPTS_PAGE = """The prompts pane (HTML): the prompt store's versions; its script reads
``GET /api/prompts`` and ``GET /api/prompts/{version}`` and switches versions through
``POST /api/prompts/use``.

Answers: 200 HTML."""
EVALS_PAGE = """The evals pane (HTML): the evals ``aimegraph eval`` wrote; its script reads
``GET /api/evals``.

Answers: 200 HTML."""


def _page(name: str, description: str) -> Callable[[Request], Awaitable[Response]]:
    """A static page; ``description`` is its entry in the HTTP reference."""

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / name, media_type="text/html")

    page.__doc__ = description
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
    """The steering routes: start, answer, carry on, cancel, note and rate runs.
    Each endpoint's docstring is its entry in the HTTP reference
    (:mod:`aimegraph.dashboard.reference`)."""

    def __init__(self, runs: RunManager) -> None:
        self.runs = runs

    # -- steering

    async def start(self, request: Request) -> Response:
        """Start a run on a goal, as ``aimegraph run`` does, in the dashboard's process.

        Body: ``goal`` (required); ``model``, a model spec (default: the thread's stored
        model, else the bundled demo's scripted model); ``config``, ``AimeConfig`` fields
        as a JSON object; ``thread_id`` (default: a new thread; a thread whose run has
        ended takes the new goal and keeps its stored settings, the given ones over
        them); ``response_format``, a typed answer's ``module:Class``.

        Answers: 202 ``{"thread_id": ...}`` (the run goes on in the background: follow
        its page or its event stream); 400 no goal, a config that is not an object or
        has an unknown field or a bad value, a bad model spec; 409 the thread is being
        run, has a run that has not ended, or too many runs are in flight here."""
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
        """Start the bundled demo (a scripted model: no key, no network), as
        ``aimegraph demo`` does.

        Body: ``approve_plan`` (true: the run pauses for its plan's approval);
        ``thread_id`` (default: a new ``demo-...`` thread).

        Answers: 202 ``{"thread_id": ...}``; 409 the thread is being run or has a run
        that has not ended."""
        body = await json_body(request)
        return await self._launch(
            self.runs.start_demo,
            approve_plan=bool(body.get("approve_plan")),
            thread_id=str(body.get("thread_id") or "").strip() or None,
        )

    async def resume(self, request: Request) -> Response:
        """Answer the run's pending waits for a human, or carry on a run that stopped
        before it ended, as ``aimegraph resume`` does. An answer for a process that
        waits on it holding the thread (a timed wait of ``aimegraph run``) is handed to
        that process; a distributed run's is queued for the workers.

        Body: the answer, as the wait asks: ``{"action": "approve"}``, ``{"action":
        "reject", "reason": ...}`` or ``{"action": "edit", "plan": {...}}`` for a plan;
        ``approve``, ``deny`` (with a ``reason``) or ``edit`` with ``args`` for a tool call
        (or LangChain's ``decisions``); ``{"answer": text}`` for ``ask_human``; for an
        escalation ``{"answer": text, "task_id": ...}``, ``{"action": "replan", "note":
        ...}``, ``{"action": "give_up"}`` or ``{"action": "edit", "plan": {...}}``.
        ``interrupt_id`` (optional) answers that wait alone, else every pending one.
        ``{}`` carries on a stopped run.

        Answers: 202 ``{"thread_id": ..., "queued": bool}`` (queued: for the workers),
        with ``"handed_to"`` (the process) when the answer went to the process waiting
        on it; 400 an answer that does not fit the wait, or none while one is needed;
        404 no such thread, no such pending wait, or nothing to resume (the run has
        ended or was cancelled); 409 another process runs the thread (or a distributed
        run is queued or running); 503 a distributed run with no broker or no
        ``[distributed]`` extra."""
        thread_id = request.path_params["thread_id"]
        body = await json_body(request)
        answer = {k: body[k] for k in ANSWER_KEYS if k in body}
        interrupt_id = body.get("interrupt_id") or None
        return await self._launch(
            self.runs.resume, thread_id, answer or None, interrupt_id, thread=thread_id
        )

    async def cancel(self, request: Request) -> Response:
        """End the thread's run as ``cancelled``, as ``aimegraph cancel`` does: a paused
        or stopped run at once, a live one (another process runs it) at its next step.

        Body: none (send ``{}``).

        Answers: 202 ``{"thread_id": ..., "status": "cancelled" | "requested"}``; 404 no
        such thread, or its run has already ended; 503 a distributed run whose queue
        cannot be reached."""
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
        """Send a note to the run's actors (read at their next step) and its planner, as
        ``aimegraph note`` does; it goes through the dashboard's memory store.

        Body: ``text``, the note (not empty).

        Answers: 202 ``{"thread_id": ...}``; 400 an empty note, or a dashboard with no
        memory store; 404 ``{"error": "no thread 'ID' in this checkpoint store"}``."""
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
        """Rate the thread's latest run, as ``aimegraph feedback`` does: kept in the
        dashboard's memory store, where a low rating or a correction becomes a lesson
        for the planner of the next similar goal.

        Body: ``rating``, a whole number from 1 to 5; ``note`` (optional), what was
        wrong or right.

        Answers: 201 the stored verdict (``thread_id``, ``goal``, ``rating``, ``note``,
        the run's ``status`` and ``answer``, ``created_at``); 400 a rating outside 1 to
        5, a thread with no goal yet, or a dashboard with no memory store; 404
        ``{"error": "no thread 'ID' in this checkpoint store"}``."""
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
