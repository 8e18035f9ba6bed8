"""The panes beside the runs: long-term memory (episodes and lessons per scope)
from the memory store, through the same functions as ``aimegraph memory``; prompt
versions and their scores from the prompt store (``aimegraph prompts``); the evals
``aimegraph eval`` wrote, and their reports.

Values go to the page as JSON and are put in it as text, like everything else
the dashboard shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, Item
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from aimegraph.eval.listing import eval_report, list_evals
from aimegraph.memory.browse import (
    KINDS,
    forget_memory,
    list_memories,
    memory_line,
    memory_record,
    memory_scopes,
    search_memories,
)
from aimegraph.memory.episodes import DEFAULT_SCOPE
from aimegraph.optimizer.store import PromptStore, PromptVersion, UnknownPromptVersionError
from aimegraph.prompts.source import DEFAULT_VERSION

MAX_ITEMS = 500
"""The most items one listing or search returns."""


class MemoryPane:
    """``GET /api/memory`` lists or searches one scope; ``POST /api/memory/forget``
    deletes an item (an episode and its lesson) by key."""

    def __init__(self, store: BaseStore | None) -> None:
        self.store = store

    async def items(self, request: Request) -> Response:
        """The memories of one scope, newest first, or those nearest a search (the
        retrieval the planner and actors use), as ``aimegraph memory list | search``.

        Query: ``scope`` (a ``user_id``; default ``default``), ``kind`` (``episodes``
        or ``lessons``; default both), ``q`` (a search), ``limit`` (1 to 500; default 100).

        Answers: 200 ``{"scopes": [...], "scope": ..., "query": ..., "items": [...]}``,
        each item with its ``namespace``, ``key``, ``value``, ``kind``, ``line`` (what it
        is, in one line), ``created_at``, ``updated_at`` (and ``score`` from a search);
        400 an unknown ``kind`` or a ``limit`` that is not a number; 404 the dashboard
        has no memory store."""
        if self.store is None:
            return _no_store()
        params = request.query_params
        scope = params.get("scope") or DEFAULT_SCOPE
        kind = params.get("kind") or None
        query = (params.get("q") or "").strip()
        if kind is not None and kind not in KINDS:
            return JSONResponse({"error": f"kind must be one of {', '.join(KINDS)}"}, 400)
        try:
            limit = min(max(int(params.get("limit") or 100), 1), MAX_ITEMS)
        except ValueError:
            return JSONResponse({"error": "limit must be a number"}, 400)
        data = await run_in_threadpool(self._items, self.store, scope, kind, query, limit)
        return JSONResponse(data)

    @staticmethod
    def _items(
        store: BaseStore, scope: str, kind: str | None, query: str, limit: int
    ) -> dict[str, Any]:
        items: list[Item]
        if query:
            found = search_memories(store, scope, query, limit)
            items = [i for i in found if kind in (None, i.namespace[-1])]
        else:
            items = list_memories(store, scope, [kind] if kind else KINDS, limit)
        return {
            "scopes": sorted({*memory_scopes(store), DEFAULT_SCOPE, scope}),
            "scope": scope,
            "query": query,
            "items": [
                {**memory_record(i), "kind": i.namespace[-1], "line": memory_line(i)} for i in items
            ],
        }

    async def forget(self, request: Request) -> Response:
        """Delete a memory (an episode and the lesson stored under its key), as
        ``aimegraph memory forget``.

        Body: ``key`` (required); ``scope`` (default ``default``).

        Answers: 200 ``{"key": ..., "scope": ..., "forgotten": [kinds deleted]}``; 400 no
        key; 404 no such key in the scope, or the dashboard has no memory store."""
        if self.store is None:
            return _no_store()
        body = await json_body(request)
        scope, key = str(body.get("scope") or DEFAULT_SCOPE), str(body.get("key") or "")
        if not key:
            return JSONResponse({"error": "send the key of the memory to forget"}, 400)
        forgotten = await run_in_threadpool(forget_memory, self.store, scope, key)
        if not forgotten:
            return JSONResponse({"error": f"no memory {key!r} in scope {scope!r}"}, 404)
        return JSONResponse({"key": key, "scope": scope, "forgotten": forgotten})


class PromptsPane:
    """``GET /api/prompts`` lists the versions (newest first) with their parent,
    scores, source, date and which one is active; ``GET /api/prompts/{version}``
    gives one version's component texts; ``POST /api/prompts/use`` makes a version
    the active one (the runs that start from then on use it, as ``aimegraph
    prompts use``)."""

    def __init__(self, store: PromptStore | None) -> None:
        self.store = store

    async def versions(self, request: Request) -> Response:
        """The prompt store's versions, newest first (the built-in prompts among them),
        as ``aimegraph prompts list``.

        Answers: 200 ``{"path": ..., "active": ..., "current": ..., "versions": [...]}``,
        each version with its ``parent``, ``source``, ``created_at``, ``scores``,
        ``note``, the components it ``changed`` and whether it is ``active``; 404 the
        dashboard has no prompt store."""
        if self.store is None:
            return _no_prompts()
        return JSONResponse(await run_in_threadpool(self._versions, self.store))

    @staticmethod
    def _versions(store: PromptStore) -> dict[str, Any]:
        active, stored = store.active(), store.list()
        if not any(v.version == DEFAULT_VERSION for v in stored):
            stored.insert(0, store.get(DEFAULT_VERSION))  # the built-in prompts, always usable
        return {
            "path": str(store.path),
            "active": active,
            "current": active or DEFAULT_VERSION,
            "versions": [_summary(v, active) for v in reversed(stored)],
        }

    async def version(self, request: Request) -> Response:
        """One prompt version with its component texts, as ``aimegraph prompts show``.

        Answers: 200 the version as listed, with ``texts`` (component: text) and
        ``changed_from_parent``; 404 no such version, or no prompt store."""
        if self.store is None:
            return _no_prompts()
        try:
            data = await run_in_threadpool(
                self._version, self.store, request.path_params["version"]
            )
        except UnknownPromptVersionError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        return JSONResponse(data)

    @staticmethod
    def _version(store: PromptStore, version: str) -> dict[str, Any]:
        found = store.get(version)
        parent = store.get(found.parent) if found.parent else None
        return {
            **_summary(found, store.active()),
            "texts": dict(found.texts),
            "changed_from_parent": found.changed(parent.texts) if parent else found.changed(),
        }

    async def use(self, request: Request) -> Response:
        """Make a version the active one: the runs that start from then on use it, as
        ``aimegraph prompts use``.

        Body: ``version`` (required).

        Answers: 200 ``{"active": version}``; 400 no version; 404 no such version, or no
        prompt store."""
        if self.store is None:
            return _no_prompts()
        version = str((await json_body(request)).get("version") or "")
        if not version:
            return JSONResponse({"error": "send the version to use"}, 400)
        try:
            active = await run_in_threadpool(self.store.use, version)
        except UnknownPromptVersionError as exc:
            return JSONResponse({"error": str(exc)}, 404)
        return JSONResponse({"active": active})


REPORT_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)
"""An eval report is self-contained HTML with inline styles and SVG and no script:
its page may style itself, and load and run nothing."""


class EvalsPane:
    """``GET /api/evals`` lists the evals in the evals folder (newest first, with each
    system's pass@1 and cost per solved task); ``GET /evals/{name}`` serves an eval's
    HTML report."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def evals(self, request: Request) -> Response:
        """The evals ``aimegraph eval`` wrote in the evals folder, newest first.

        Answers: 200 ``{"folder": ..., "evals": [...]}``, each eval with its ``name``,
        ``suite``, ``k``, ``complete``, ``rollouts`` of ``expected``, ``updated_at`` and
        per system its pass@1 and tokens and cost per solved task."""
        items = await run_in_threadpool(list_evals, self.folder)
        return JSONResponse({"folder": str(self.folder), "evals": items})

    async def report(self, request: Request) -> Response:
        """An eval's HTML report (self-contained; served with a policy that lets it load
        and run nothing).

        Answers: 200 HTML; 404 ``{"error": "no such eval report"}``."""
        path = eval_report(self.folder, request.path_params["name"])
        if path is None:
            return JSONResponse({"error": "no such eval report"}, 404)
        text = await run_in_threadpool(path.read_text, "utf-8")
        return HTMLResponse(text, headers={"Content-Security-Policy": REPORT_POLICY})


def _summary(version: PromptVersion, active: str | None) -> dict[str, Any]:
    """A version without its texts: what the list shows."""
    return {
        "version": version.version,
        "parent": version.parent,
        "source": version.source,
        "created_at": version.created_at,
        "scores": dict(version.scores),
        "note": version.note,
        "changed": version.changed(),
        "active": version.version == (active or DEFAULT_VERSION),
    }


def _no_prompts() -> Response:
    return JSONResponse({"error": "this dashboard has no prompt store"}, 404)


def _no_store() -> Response:
    return JSONResponse({"error": "this dashboard has no memory store (--store URL)"}, 404)


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object ({} for anything else)."""
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
