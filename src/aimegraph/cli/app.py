"""The ``aimegraph`` entry point: the parser of every command, and the hand-over of a
parsed command to :mod:`aimegraph.cli.execute`.

Starting is cheap: the parser knows each command's name, help and group module; a
group's module (and with it the engine, Rich, LangGraph) is imported only when one of
its commands is parsed, and adds that command's flags then. ``aimegraph --help`` loads
none of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from aimegraph.checkpoints.urls import DEFAULT_CHECKPOINT_URL
from aimegraph.cli.extras import EXTRA_OF_MODULE, missing_extra_message
from aimegraph.cli.options import checkpoints_option

if TYPE_CHECKING:
    from aimegraph.cli.support import Handler

__all__ = ["COMMANDS", "EXTRA_OF_MODULE", "build_parser", "main", "missing_extra_message"]

EXIT_HELP = (
    "exit codes: 0 succeeded, 1 failed, 2 usage, 3 rejected, 4 budget exhausted, "
    "5 paused, 6 unknown thread or nothing to resume, 7 wait timed out, 8 cancelled, "
    "9 thread busy (another process runs it), 10 blocked by a guardrail, "
    "130 / 143 stopped by SIGINT / SIGTERM "
    "(resumable)"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Only now: parsing (and every --help) needs none of what running a command does.
    from aimegraph.cli.execute import run_command

    return run_command(args)


@dataclass(frozen=True)
class Command:
    """A subcommand as the parser first knows it: the module of ``aimegraph.cli`` whose
    ``register`` adds its flags and handler, its help, and whether it has ``--json``."""

    group: str
    help: str
    description: str | None = None
    json: bool = True


COMMANDS: dict[str, Command] = {
    "run": Command("runs", "Run a goal to completion (or until a human must answer)."),
    "demo": Command("runs", "Run the bundled offline demo (scripted model, real tools)."),
    "resume": Command("resume", "Carry on a thread whose run has not ended (paused or stopped)."),
    "note": Command(
        "resume",
        "Send a note to a thread's run: its running actors read it at their next step, its "
        "planner at its next call.",
    ),
    "fork": Command("resume", "Re-run a thread from one of its checkpoints."),
    "cancel": Command(
        "resume",
        "End a live, paused or stopped run as cancelled (not resumable; a new goal on the thread "
        "starts afresh). A live run stops at its next step, then exits 8.",
    ),
    "threads": Command("threads", "List stored threads (id, status, updated, goal)."),
    "show": Command("threads", "Show a thread: checklist, verdict, final answer, usage."),
    "history": Command("threads", "List a thread's checkpoints, newest first."),
    "wait": Command(
        "threads",
        "Wait until a submitted run pauses or ends, then show it (exit code as for run).",
    ),
    "draw": Command("threads", "Draw the workflow graph, or a thread's plan (--plan)."),
    "dashboard": Command(
        "dashboard",
        "Serve the local web dashboard: watch, answer and start runs.",
        description="Serve the local web dashboard over the checkpoint store: watch, answer "
        "and start runs (needs the [dashboard] extra).",
        json=False,
    ),
    "a2a": Command(
        "serving",
        "Serve aimegraph to other agents over A2A: a2a serve (needs the [a2a] extra).",
        json=False,
    ),
    "mcp": Command(
        "serving",
        "Serve aimegraph's run tools over MCP, on stdio or streamable HTTP: mcp serve "
        "(needs the [mcp] extra).",
        json=False,
    ),
    "submit": Command(
        "distributed",
        "Queue a run for the workers and print its thread id (needs [distributed]).",
    ),
    "worker": Command(
        "distributed",
        "Serve submitted runs: a Celery worker over the Postgres checkpoints (needs "
        "[distributed]).",
    ),
    "memory": Command("memory", "Long-term memory: list, search, forget or export episodes."),
    "feedback": Command(
        "feedback",
        "Rate a thread's run (1-5) with a note: a low rating or a correction becomes a lesson "
        "for the next similar goal, and rated runs a GEPA trainset (optimize --from-feedback).",
    ),
    "knowledge": Command(
        "knowledge",
        "Knowledge base: add documents (PDF, HTML, DOCX, ...), search.",
    ),
    "optimize": Command(
        "optimize",
        "Optimise the role prompts with GEPA on JSON Lines examples; the winner goes into the "
        "prompt store, active (needs the [optimize] extra).",
    ),
    "prompts": Command(
        "prompts",
        "Prompt versions in the prompt store: list, show, diff, use, add.",
    ),
    "eval": Command(
        "eval",
        "Run a task suite on aimegraph configurations and ReAct baselines (k rollouts each, "
        "resumable) and write JSONL, Markdown and HTML reports; or compare two systems' results: "
        "eval compare A B.",
    ),
}
"""Every subcommand, in the order ``aimegraph --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The ``aimegraph`` parser: global flags, then one subcommand per command."""
    parser = argparse.ArgumentParser(
        prog="aimegraph",
        description="AIME-style multi-agent workflows on LangGraph.",
        epilog=EXIT_HELP,
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print aimegraph's version and exit"
    )
    checkpoints_option(parser, default=DEFAULT_CHECKPOINT_URL)
    parser.add_argument(
        "--store",
        metavar="URL",
        help="long-term memory store: memory, sqlite:///PATH, postgresql://... (default: "
        "memory.db beside an SQLite checkpoint file, the same database for Postgres)",
    )
    parser.add_argument(
        "--embeddings",
        choices=["hashing", "minilm"],
        default="hashing",
        help="what the memory index and a new knowledge base embed with (minilm needs the "
        "[semantic] extra)",
    )
    parser.add_argument(
        "--memory-ttl-days",
        type=float,
        metavar="DAYS",
        help="memories expire this many days after they are written (the store's TTL: "
        "SQLite and Postgres; default: kept until forgotten)",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=os.environ.get("AIMEGRAPH_OTLP_ENDPOINT"),
        help="send OpenTelemetry traces of the runs to this OTLP/HTTP endpoint, e.g. "
        "http://127.0.0.1:6006 for a local Phoenix (default: $AIMEGRAPH_OTLP_ENDPOINT; "
        "needs the [tracing] extra)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)
    parsers = {name: _declare(sub, name, spec) for name, spec in COMMANDS.items()}
    for name, spec in COMMANDS.items():
        parsers[name].populate = partial(_populate_group, spec.group, parsers)
    return parser


class _VersionAction(argparse.Action):
    """``--version``: argparse's own action wants the text up front, and reading the
    installed version (importlib.metadata) would slow every start; read only here."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import version

        print(f"aimegraph {version('aimegraph')}")
        parser.exit()


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser whose flags are added when it is parsed: ``populate``
    imports the command's group module and registers the group's commands."""

    populate: Callable[[], None] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.populate is not None:
            self.populate()
        return super().parse_known_args(args, namespace)


def _declare(sub: argparse._SubParsersAction[Any], name: str, spec: Command) -> _CommandParser:
    parser = sub.add_parser(name, help=spec.help, description=spec.description or spec.help)
    assert isinstance(parser, _CommandParser)
    if spec.json:
        parser.add_argument(
            "--json", action="store_true", help="print the result as JSON, no live view"
        )
    else:  # it prints no JSON
        parser.set_defaults(json=False)
    checkpoints_option(parser)
    return parser


def _populate_group(group: str, parsers: dict[str, _CommandParser]) -> None:
    """Import ``aimegraph.cli.<group>`` and let it add its commands' flags and handlers."""

    def command(name: str, handler: Handler) -> argparse.ArgumentParser:
        parser = parsers[name]
        parser.populate = None
        parser.set_defaults(handler=handler)
        return parser

    importlib.import_module(f"aimegraph.cli.{group}").register(command)
