"""``aimegraph prompts list | show VERSION | diff A B | use VERSION | add FILE``."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console
from rich.markup import escape

from aimegraph.cli.support import EXIT_NOT_FOUND, AddCommand
from aimegraph.optimizer.store import (
    DEFAULT_ALIAS,
    PromptStore,
    PromptVersion,
    UnknownPromptVersionError,
    default_prompt_store,
)
from aimegraph.prompts import DEFAULT_PROMPTS, load_prompt_set
from aimegraph.prompts.source import DEFAULT_VERSION

__all__ = ["diff_versions", "register"]


def _prompt_store(args: argparse.Namespace) -> PromptStore:
    """``--prompts PATH``, else ``prompts.jsonl`` beside the checkpoints."""
    return PromptStore(args.prompts or default_prompt_store(args.checkpoints))


def register(command: AddCommand) -> None:
    """Add ``prompts`` and its subcommands."""
    _add_arguments(command("prompts", cmd_prompts))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prompts",
        metavar="STORE",
        help="prompt store file (default: prompts.jsonl beside an SQLite checkpoint "
        "file, else .aimegraph/prompts.jsonl)",
    )
    actions = parser.add_subparsers(dest="prompts_action", required=True)
    listing = actions.add_parser(
        "list", help="every stored version, oldest first; * marks the active one"
    )
    show = actions.add_parser("show", help="a version's full texts ('default': the built-in)")
    show.add_argument("version", help="version id or a unique prefix of it")
    show.add_argument(
        "--component", choices=sorted(DEFAULT_PROMPTS), help="print only this text, as is"
    )
    diff = actions.add_parser("diff", help="unified diff of two versions, per component")
    diff.add_argument("a", help="version id, prefix or 'default'")
    diff.add_argument("b", help="version id, prefix or 'default'")
    diff.add_argument("--component", choices=sorted(DEFAULT_PROMPTS), help="only this one")
    use = actions.add_parser("use", help="make a version the active one: runs from now on use it")
    use.add_argument("version", help="version id, prefix or 'default'")
    add = actions.add_parser(
        "add", help="store a prompt set (JSON / YAML file of component name to text)"
    )
    add.add_argument("file")
    add.add_argument("--parent", help="version the file's components are laid over")
    add.add_argument("--note", default="", help="what changed and why")
    add.add_argument("--use", action="store_true", help="make it the active version")
    for action in (listing, show, diff, use, add):  # also after the action, as with memory
        action.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
        )


def cmd_prompts(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    """Run one ``aimegraph prompts`` action; 0 on success, 6 for an unknown version."""
    store = _prompt_store(args)
    try:
        return _run(args, store, console)
    except UnknownPromptVersionError as exc:
        Console(stderr=True, highlight=False).print(
            f"[red]error:[/red] {escape(str(exc.args[0]))}", soft_wrap=True
        )
        return EXIT_NOT_FOUND


def _run(args: argparse.Namespace, store: PromptStore, console: Console) -> int:
    action = args.prompts_action
    if action == "list":
        _list(store, args, console)
    elif action == "show":
        _show(store.get(args.version), args, console)
    elif action == "diff":
        a, b = store.get(args.a), store.get(args.b)
        diffs = diff_versions(a, b, [args.component] if args.component else None)
        if args.json:
            print(json.dumps(diffs, ensure_ascii=False, indent=1))
        elif not diffs:
            console.print(f"{a.version} and {b.version}: no differences", markup=False)
        else:
            print("".join(diffs.values()), end="")
    elif action == "use":
        version = store.use(args.version)
        _report(args, console, {"active": version}, f"active prompt version: {version}")
    else:
        texts = load_prompt_set(args.file)
        version = store.add(texts, parent=args.parent, source="manual", note=args.note)
        if args.use:
            store.use(version)
        _report(
            args,
            console,
            {"version": version, "active": store.active()},
            f"stored {version}" + (" (active)" if store.active() == version else ""),
        )
    return 0


def diff_versions(
    a: PromptVersion, b: PromptVersion, components: list[str] | None = None
) -> dict[str, str]:
    """A unified diff (``difflib``) per component whose text differs."""
    diffs = {}
    for name in components or sorted(set(a.texts) | set(b.texts)):
        old, new = a.texts.get(name, ""), b.texts.get(name, "")
        if old == new:
            continue
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{a.version}/{name}",
            tofile=f"{b.version}/{name}",
        )
        diffs[name] = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return diffs


def _list(store: PromptStore, args: argparse.Namespace, console: Console) -> None:
    versions, active = store.list(), store.active()
    if args.json:
        rows = [{k: v for k, v in p.as_dict().items() if k != "texts"} for p in versions]
        for row, version in zip(rows, versions, strict=True):
            row |= {"active": version.version == active, "changed": version.changed()}
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    if not versions:
        console.print(f"(no prompt versions in {store.path})", markup=False)
    for p in versions:
        mark = "*" if p.version == active else " "
        scores = " ".join(f"{k}={v:.3g}" for k, v in sorted(p.scores.items())) or "-"
        console.print(
            f"{mark} {p.version}  {p.created_at[:19]:19}  {p.source:7} parent "
            f"{p.parent or '-':12}  {scores:20} changed: {', '.join(p.changed()) or '-'}"
            + (f"  {p.note}" if p.note else ""),
            markup=False,
            soft_wrap=True,
        )
    if active is None:
        console.print(
            f"active: none (runs use the built-in prompts, version {DEFAULT_VERSION})",
            markup=False,
        )


def _show(p: PromptVersion, args: argparse.Namespace, console: Console) -> None:
    if args.component:
        text = p.texts[args.component]
        if args.json:
            text = json.dumps(text, ensure_ascii=False)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    if args.json:
        print(json.dumps(p.as_dict(), ensure_ascii=False, indent=1))
        return
    built_in = p.version == DEFAULT_VERSION and not p.created_at
    name = f"{DEFAULT_ALIAS} ({p.version})" if built_in else p.version
    console.print(f"[bold]version {escape(name)}[/bold]")
    details: Mapping[str, object] = {
        "parent": p.parent or "-",
        "source": p.source,
        "created": p.created_at or "-",
        "scores": json.dumps(dict(p.scores)) if p.scores else "-",
        "note": p.note or "-",
    }
    for key, value in details.items():
        console.print(f"{key}: {value}", markup=False)
    for component, text in p.texts.items():
        console.print(f"\n[bold]--- {escape(component)} ---[/bold]")
        console.print(text, markup=False, highlight=False, soft_wrap=True)


def _report(args: argparse.Namespace, console: Console, data: dict[str, object], line: str) -> None:
    if args.json:
        print(json.dumps(data))
    else:
        console.print(line, markup=False)
