"""``aimegraph memory list | search QUERY | forget KEY | export FILE``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from langgraph.store.base import BaseStore, Item, SearchItem
from rich.console import Console
from rich.markup import escape

from aimegraph.memory.episodes import (
    DEFAULT_SCOPE,
    EPISODES,
    LESSONS,
    ROOT,
    RUN_TASK_ID,
    namespace,
    rank_items,
    search_ops,
)
from aimegraph.memory.store import DEFAULT_STORE_URL
from aimegraph.nodes.sections import clip

__all__ = [
    "add_memory_arguments",
    "default_store_url",
    "forget_memory",
    "list_memories",
    "memory_line",
    "memory_record",
    "memory_scopes",
    "run_memory_command",
    "search_memories",
]

KINDS = (EPISODES, LESSONS)
_PAGE = 500


def default_store_url(checkpoints_url: str) -> str:
    """Memory beside the checkpoints: ``memory.db`` next to an SQLite checkpoint file,
    the same database for Postgres, in-process memory for in-process checkpoints."""
    lowered = checkpoints_url.strip().lower()
    if lowered.startswith("sqlite:///") and not lowered.endswith(":memory:"):
        path = Path(checkpoints_url.strip()[len("sqlite:///") :])
        return f"sqlite:///{path.parent / 'memory.db'}"
    if lowered.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return checkpoints_url
    if lowered in ("memory", "memory://", ":memory:", "sqlite:///:memory:"):
        return "memory"
    return DEFAULT_STORE_URL


def add_memory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--user", default=DEFAULT_SCOPE, help=f"memory scope: the runs' user_id ({DEFAULT_SCOPE})"
    )
    actions = parser.add_subparsers(dest="memory_action", required=True)
    listing = actions.add_parser("list", help="list episodes and lessons, newest first")
    listing.add_argument("--kind", choices=KINDS, help="only episodes or only lessons")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    search = actions.add_parser("search", help="the episodes and lessons nearest a query")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5, help="how many (5)")
    forget = actions.add_parser("forget", help="delete an episode and its lesson by key")
    forget.add_argument("key", help="{thread_id}:{task_id}:{attempt}, as listed")
    export = actions.add_parser("export", help="write every item of the scope as JSON Lines")
    export.add_argument("file", help="output file ('-' for stdout)")


def run_memory_command(args: argparse.Namespace, store: BaseStore, console: Console) -> int:
    """Run one ``aimegraph memory`` action; 0 on success, 6 for an unknown key."""
    scope = args.user
    if args.memory_action == "list":
        kinds = [args.kind] if args.kind else list(KINDS)
        _show(list_memories(store, scope, kinds, args.limit), args, console)
    elif args.memory_action == "search":
        _show(search_memories(store, scope, args.query, args.k), args, console)
    elif args.memory_action == "forget":
        forgotten = forget_memory(store, scope, args.key)
        if not forgotten:
            console.print(f"no memory {escape(args.key)!r} in scope {escape(scope)!r}")
            return 6
        console.print(f"forgot {escape(args.key)} ({', '.join(forgotten)})")
    else:
        lines = [
            json.dumps(memory_record(i), ensure_ascii=False)
            for kind in KINDS
            for i in _all(store, scope, kind)
        ]
        text = "".join(line + "\n" for line in lines)
        if args.file == "-":
            print(text, end="")
        else:
            Path(args.file).write_text(text, encoding="utf-8")
            console.print(f"exported {len(lines)} item(s) to {escape(args.file)}")
    return 0


# The actions as functions over a store, shared by the CLI and the dashboard.


def memory_scopes(store: BaseStore) -> list[str]:
    """The scopes (``user_id`` values, and ``default``) that hold memories."""
    found = store.list_namespaces(prefix=(ROOT,), max_depth=3, limit=10_000)
    return sorted({ns[1] for ns in found if len(ns) == 3 and ns[2] in KINDS})


def list_memories(
    store: BaseStore, scope: str, kinds: Sequence[str] = KINDS, limit: int = 50
) -> list[Item]:
    """The scope's newest ``limit`` items of ``kinds``, newest first."""
    items = (i for kind in kinds for i in _all(store, scope, kind))
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


def _all(store: BaseStore, scope: str, kind: str) -> Iterator[Item]:
    offset = 0
    while True:
        page = store.search(namespace(scope, kind), limit=_PAGE, offset=offset)
        yield from page
        if len(page) < _PAGE:
            return
        offset += _PAGE


def _show(items: Sequence[Item], args: argparse.Namespace, console: Console) -> None:
    if args.json:
        print(json.dumps([memory_record(i) for i in items], ensure_ascii=False, indent=1))
        return
    if not items:
        console.print("(no memories)")
        return
    for item in items:
        console.print(f"[bold]{escape(item.key)}[/bold]  {escape(memory_line(item))}")
