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
    namespace,
    rank_items,
    search_ops,
)
from aimegraph.memory.render import clip
from aimegraph.memory.store import DEFAULT_STORE_URL

__all__ = ["add_memory_arguments", "default_store_url", "run_memory_command"]

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
        items = sorted(
            (i for kind in kinds for i in _all(store, scope, kind)),
            key=lambda i: i.updated_at,
            reverse=True,
        )[: args.limit]
        _show(items, args, console)
    elif args.memory_action == "search":
        results = cast(
            list[list[SearchItem]],
            store.batch(search_ops(store, scope, KINDS, args.query, args.k)),
        )
        _show(rank_items(store, results, args.query, args.k), args, console)
    elif args.memory_action == "forget":
        present = [k for k in KINDS if store.get(namespace(scope, k), args.key) is not None]
        if not present:
            console.print(f"no memory {escape(args.key)!r} in scope {escape(scope)!r}")
            return 6
        for kind in present:
            store.delete(namespace(scope, kind), args.key)
        console.print(f"forgot {escape(args.key)} ({', '.join(present)})")
    else:
        lines = [
            json.dumps(_record(i), ensure_ascii=False)
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


def _all(store: BaseStore, scope: str, kind: str) -> Iterator[Item]:
    offset = 0
    while True:
        page = store.search(namespace(scope, kind), limit=_PAGE, offset=offset)
        yield from page
        if len(page) < _PAGE:
            return
        offset += _PAGE


def _record(item: Item) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def _show(items: Sequence[Item], args: argparse.Namespace, console: Console) -> None:
    if args.json:
        print(json.dumps([_record(i) for i in items], ensure_ascii=False, indent=1))
        return
    if not items:
        console.print("(no memories)")
        return
    for item in items:
        value = item.value
        kind = item.namespace[-1]
        if kind == LESSONS:
            title, lesson = clip(value.get("title", ""), 60), clip(value.get("lesson", ""), 120)
            line = f"lesson    {title}: {lesson}"
        else:
            what = value.get("goal") if value.get("task_id") == "run" else value.get("title")
            line = f"{value.get('outcome', ''):9} {clip(str(what), 80)}"
        console.print(f"[bold]{escape(item.key)}[/bold]  {escape(line)}")
