"""``aimegraph memory list | search QUERY | forget KEY | export FILE``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore, Item
from rich.console import Console
from rich.markup import escape

from aimegraph.cli.support import EXIT_NOT_FOUND, AddCommand
from aimegraph.memory.browse import (
    KINDS,
    all_memories,
    forget_memory,
    list_memories,
    memory_line,
    memory_record,
    search_memories,
)
from aimegraph.memory.episodes import DEFAULT_SCOPE

__all__ = ["register"]


def register(command: AddCommand) -> None:
    """Add ``memory`` and its actions."""
    _add_arguments(command("memory", cmd_memory))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
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


def cmd_memory(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    """Run one ``aimegraph memory`` action; 0 on success, 6 for an unknown key."""
    store: BaseStore = args.memory_store()
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
            return EXIT_NOT_FOUND
        console.print(f"forgot {escape(args.key)} ({', '.join(forgotten)})")
    else:
        lines = [
            json.dumps(memory_record(i), ensure_ascii=False)
            for kind in KINDS
            for i in all_memories(store, scope, kind)
        ]
        text = "".join(line + "\n" for line in lines)
        if args.file == "-":
            print(text, end="")
        else:
            Path(args.file).write_text(text, encoding="utf-8")
            console.print(f"exported {len(lines)} item(s) to {escape(args.file)}")
    return 0


def _show(items: Sequence[Item], args: argparse.Namespace, console: Console) -> None:
    if args.json:
        print(json.dumps([memory_record(i) for i in items], ensure_ascii=False, indent=1))
        return
    if not items:
        console.print("(no memories)")
        return
    for item in items:
        console.print(f"[bold]{escape(item.key)}[/bold]  {escape(memory_line(item))}")
