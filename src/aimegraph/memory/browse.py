"""Stored memories as a person browses them: the scopes, the newest items, a
search, forgetting one, and one line or record per item. Shared by ``aimegraph
memory`` and the dashboard's memory pane."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from langgraph.store.base import BaseStore, Item, SearchItem

from aimegraph.memory.episodes import (
    EPISODES,
    LESSONS,
    ROOT,
    RUN_TASK_ID,
    namespace,
    rank_items,
    search_ops,
)
from aimegraph.memory.sections import clip

__all__ = [
    "KINDS",
    "all_memories",
    "forget_memory",
    "list_memories",
    "memory_line",
    "memory_record",
    "memory_scopes",
    "search_memories",
]

KINDS = (EPISODES, LESSONS)
_PAGE = 500


def memory_scopes(store: BaseStore) -> list[str]:
    """The scopes (``user_id`` values, and ``default``) that hold memories."""
    found = store.list_namespaces(prefix=(ROOT,), max_depth=3, limit=10_000)
    return sorted({ns[1] for ns in found if len(ns) == 3 and ns[2] in KINDS})


def list_memories(
    store: BaseStore, scope: str, kinds: Sequence[str] = KINDS, limit: int = 50
) -> list[Item]:
    """The scope's newest ``limit`` items of ``kinds``, newest first."""
    items = (i for kind in kinds for i in all_memories(store, scope, kind))
    return sorted(items, key=lambda i: i.updated_at, reverse=True)[:limit]


def search_memories(store: BaseStore, scope: str, query: str, k: int = 5) -> list[SearchItem]:
    """The scope's ``k`` episodes and lessons nearest ``query``, best first (as the
    planner and the actor factory retrieve them)."""
    results = cast(list[list[SearchItem]], store.batch(search_ops(store, scope, KINDS, query, k)))
    return rank_items(store, results, query, k)


def forget_memory(store: BaseStore, scope: str, key: str) -> list[str]:
    """Delete the episode and lesson stored under ``key``; the kinds deleted
    (empty when the scope has no such key)."""
    present = [kind for kind in KINDS if store.get(namespace(scope, kind), key) is not None]
    for kind in present:
        store.delete(namespace(scope, kind), key)
    return present


def memory_record(item: Item) -> dict[str, Any]:
    """An item as JSON: namespace, key, value, times (and score, from a search)."""
    record: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if isinstance(item, SearchItem) and item.score is not None:
        record["score"] = item.score
    return record


def memory_line(item: Item) -> str:
    """One line saying what an item is: a lesson, or an episode's outcome and task."""
    value = item.value
    if item.namespace[-1] == LESSONS:
        title, lesson = clip(value.get("title", ""), 60), clip(value.get("lesson", ""), 120)
        return f"lesson    {title}: {lesson}"
    what = value.get("goal") if value.get("task_id") == RUN_TASK_ID else value.get("title")
    return f"{value.get('outcome', ''):9} {clip(str(what), 80)}"


def all_memories(store: BaseStore, scope: str, kind: str) -> Iterator[Item]:
    """Every item of one kind in the scope, page by page."""
    offset = 0
    while True:
        page = store.search(namespace(scope, kind), limit=_PAGE, offset=offset)
        yield from page
        if len(page) < _PAGE:
            return
        offset += _PAGE
