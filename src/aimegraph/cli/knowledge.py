"""``aimegraph knowledge add PATH... | search QUERY``, and ``--knowledge DIR`` for
``aimegraph run``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console
from rich.markup import escape

from aimegraph.cli.support import EXIT_USAGE, AddCommand, CliError
from aimegraph.knowledge.base import (
    MANIFEST_FILE,
    FilesAdded,
    KnowledgeBase,
    format_passages,
)
from aimegraph.knowledge.documents import SUFFIXES, DocumentLoadError

__all__ = ["DEFAULT_KNOWLEDGE_DIR", "add_knowledge_option", "register"]

DEFAULT_KNOWLEDGE_DIR: Final = Path(".aimegraph/knowledge")
_FORMATS = ", ".join(suffix.lstrip(".") for suffix in SUFFIXES)
_UNCHANGED_SHOWN = 3


def add_knowledge_option(parser: argparse.ArgumentParser) -> None:
    """``--knowledge DIR`` of ``aimegraph run``."""
    parser.add_argument(
        "--knowledge",
        metavar="DIR",
        help="a knowledge base made by `aimegraph knowledge add` (its default: "
        f"{DEFAULT_KNOWLEDGE_DIR}): actors get the knowledge bundle's knowledge_search "
        "and the passages nearest their task. Stored with the run, so resume finds it",
    )


def register(command: AddCommand) -> None:
    """Add ``knowledge`` and its actions."""
    _add_arguments(command("knowledge", cmd_knowledge))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    _kb_option(parser, default=str(DEFAULT_KNOWLEDGE_DIR))
    actions = parser.add_subparsers(dest="knowledge_action", required=True)
    add = actions.add_parser(
        "add",
        help=f"load, chunk and add documents ({_FORMATS}); a file added again replaces its "
        "passages (left as is when unchanged); a new knowledge base embeds with the global "
        "--embeddings",
    )
    add.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories to search")
    add.add_argument(
        "--chunk-size", type=int, default=1000, help="largest chunk, in characters (1000)"
    )
    add.add_argument("--chunk-overlap", type=int, default=150, help="characters chunks share (150)")
    search = actions.add_parser("search", help="the passages nearest a query, with citations")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=4, help="how many (4)")
    for action in (add, search):
        _kb_option(action)
        action.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
        )


def _kb_option(parser: argparse.ArgumentParser, default: str = argparse.SUPPRESS) -> None:
    """``--kb`` before or after the action: the action's copy keeps the value given
    before it unless given again (SUPPRESS sets nothing when absent)."""
    parser.add_argument(
        "--kb", metavar="DIR", default=default, help=f"knowledge base ({DEFAULT_KNOWLEDGE_DIR})"
    )


def cmd_knowledge(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    """Run one ``aimegraph knowledge`` action: 0 on success, 1 for a document that
    cannot be read, 2 for a path or knowledge base that does not exist."""
    directory = Path(args.kb)
    exists = (directory / MANIFEST_FILE).is_file()
    if args.knowledge_action == "search":
        if not exists:
            raise CliError(f"no knowledge base in {directory}: add documents first", EXIT_USAGE)
        passages = KnowledgeBase.load(directory).search(args.query, k=args.k)
        if args.json:
            print(json.dumps([p.model_dump() for p in passages], ensure_ascii=False))
        else:
            console.print(format_passages(passages), markup=False)
        return 0
    kb = KnowledgeBase.load(directory) if exists else KnowledgeBase(args.embeddings)
    try:
        added = kb.add_files(
            args.paths, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap
        )
    except FileNotFoundError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except DocumentLoadError as exc:
        raise CliError(f"{exc}; nothing was added", 1) from exc
    kb.save(directory)
    if args.json:
        print(
            json.dumps(
                {
                    "added": len(added.ids),
                    "replaced": added.replaced,
                    "unchanged": added.unchanged,
                    "passages": len(kb),
                    "knowledge": str(directory),
                }
            )
        )
    else:
        console.print(
            f"{_summary(added)}; {escape(str(directory))} holds {len(kb)}", highlight=False
        )
    return 0


def _summary(added: FilesAdded) -> str:
    """``added 3 passage(s), replacing 2``, and the files left as they were."""
    parts = [f"added {len(added.ids)} passage(s)"]
    if added.replaced:
        parts[0] += f", replacing {added.replaced} from an earlier add of the same file(s)"
    if added.unchanged:
        shown = ", ".join(added.unchanged[:_UNCHANGED_SHOWN])
        more = len(added.unchanged) - _UNCHANGED_SHOWN
        parts.append(
            f"{len(added.unchanged)} file(s) unchanged, already indexed "
            f"({escape(shown)}{f' and {more} more' if more > 0 else ''})"
        )
    return "; ".join(parts)
