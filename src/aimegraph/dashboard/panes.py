"""The panes beside the runs: long-term memory (episodes and lessons per scope)
from the memory store, through the same functions as ``aimegraph memory``.

Item values go to the page as JSON and are put in it as text, like everything
else the dashboard shows.
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import BaseStore, Item
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aimegraph.memory.commands import (
    KINDS,
    forget_memory,
    list_memories,
    memory_line,
    memory_record,
    memory_scopes,
    search_memories,
)
from aimegraph.memory.episodes import DEFAULT_SCOPE

MAX_ITEMS = 500
"""The most items one listing or search returns."""


class MemoryPane:
    """``GET /api/memory`` lists or searches one scope; ``POST /api/memory/forget``
    deletes an item (an episode and its lesson) by key."""

    def __init__(self, store: BaseStore | None) -> None:
        self.store = store

    async def items(self, request: Request) -> Response:
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


def _no_store() -> Response:
    return JSONResponse({"error": "this dashboard has no memory store (--store URL)"}, 404)


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object ({} for anything else)."""
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
