"""Runs a parsed command: opens the stores it needs, sets up its logs and tracing,
and turns its errors into one line and an exit code. Imported only once the command
line is parsed, so ``aimegraph --help`` and a command's own ``--help`` load none of it."""

from __future__ import annotations

import argparse
import signal
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import (
    CheckpointConnectionError,
    MissingCheckpointBackendError,
    make_serializer,
    open_checkpointer,
    redact_url,
    sqlite_file,
)
from aimegraph.cli.extras import missing_extra_message
from aimegraph.cli.runlog import log_directory, run_logging
from aimegraph.cli.support import EXIT_SIGNALLED, EXIT_USAGE, CliError
from aimegraph.console import cli_console

__all__ = ["run_command"]


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args`` was parsed for; its exit code."""
    console = cli_console(stderr=args.json)
    errors = cli_console(stderr=True)
    stores = _Stores(create=args.command not in READING_COMMANDS)
    try:
        with (
            _tracing(args.otlp),
            _run_logs(args, errors),
            ExitStack() as stack,
        ):
            checkpointer = stores.checkpointer(stack, args.checkpoints)
            args.memory_store = lambda: stores.memory(stack, args)
            return int(args.handler(args, checkpointer, console))
    except CliError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return exc.code
    except ValidationError as exc:  # settings: --config, flags, files of agents or systems
        from aimegraph.config import settings_error  # the engine's config: only on this path

        errors.print(f"[red]error:[/red] {escape(settings_error(exc))}", soft_wrap=True)
        return EXIT_USAGE
    # Bad URLs, specs and config values; MCP servers down; no sandbox for model-written code.
    except usage_errors() as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return EXIT_USAGE
    except ImportError as exc:
        # Whatever path reached a missing extra (a flag, a --config field such as
        # optimize_online, a stored run's settings), the user's fix is one pip install.
        if (message := missing_extra_message(exc)) is None:
            raise
        errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        return EXIT_USAGE
    except Exception as exc:
        # A store that fails once open (an SQLite file damaged in the middle, a
        # Postgres error while creating tables) is the user's to repair, not a bug.
        if not isinstance(exc, database_errors()):
            raise
        reason = " ".join(str(exc).split()) or type(exc).__name__
        errors.print(
            f"[red]error:[/red] {escape(stores.named())}: {escape(reason)}", soft_wrap=True
        )
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before (or after) a run: nothing to stop
        errors.print("interrupted")
        return EXIT_SIGNALLED + signal.SIGINT


READING_COMMANDS = frozenset({"threads", "show", "history", "wait", "draw", "memory"})
"""Commands that only read the stores: an SQLite file that does not exist is read as
empty and not created (a mistyped path leaves no stray database behind)."""

SERVICE_COMMANDS = frozenset({"worker"})
"""Long-running services that log as their framework does (Celery's worker: a line per
delivery at ``--log-level``), not through the run logs."""


def _run_logs(args: argparse.Namespace, errors: Console) -> AbstractContextManager[object]:
    """The run logs of a command (see :mod:`aimegraph.cli.runlog`); none for a service:
    a root handler would keep Celery from setting up its own, and the worker would
    log nothing, not even that it is ready."""
    if args.command in SERVICE_COMMANDS:
        return nullcontext()
    return run_logging(log_directory(args.checkpoints), errors)


STORE_ERRORS = (CheckpointConnectionError, MissingCheckpointBackendError, sqlite3.Error, OSError)


USAGE_ERRORS = {
    "aimegraph.mcp_servers": "McpServerError",
    "aimegraph.sandbox.protocol": "SandboxUnavailable",
}
"""Besides ValueError, the errors that are the user's to fix, by module: an MCP server
down, no sandbox for model-written code."""


def usage_errors() -> tuple[type[Exception], ...]:
    """ValueError and the :data:`USAGE_ERRORS` of the modules loaded in this process (a
    module the command never imported raised none of them, and is not imported here:
    ``aimegraph threads`` loads no sandbox)."""
    found: list[type[Exception]] = [ValueError]
    for module_name, error in USAGE_ERRORS.items():
        if (module := sys.modules.get(module_name)) is not None:
            found.append(getattr(module, error))
    return tuple(found)


def database_errors() -> tuple[type[Exception], ...]:
    """The error classes of the database drivers loaded in this process (the memory
    store's SQLite may be pysqlite3, whose errors are not sqlite3's)."""
    found: list[type[Exception]] = [sqlite3.DatabaseError]
    if (pysqlite := sys.modules.get("pysqlite3.dbapi2")) is not None:
        found.append(pysqlite.DatabaseError)
    if (psycopg := sys.modules.get("psycopg")) is not None:
        found.append(psycopg.Error)
    return tuple(found)


class _Stores:
    """Opens a command's checkpoint store and, when asked, its memory store; knows
    which it opened, to name them in an error. With ``create=False`` an SQLite file
    that does not exist is read as an empty store and not created."""

    def __init__(self, *, create: bool) -> None:
        self.create = create
        self.opened: list[str] = []

    def checkpointer(self, stack: ExitStack, url: str) -> BaseCheckpointSaver[Any]:
        """The checkpointer for ``url``, closed with ``stack``; a store that cannot be
        opened (server down, bad path, missing extra) is a usage error."""
        self.opened.append(f"checkpoint store {redact_url(url)}")
        try:
            if self._absent(url):
                return InMemorySaver(serde=make_serializer())
            return stack.enter_context(open_checkpointer(url))
        except STORE_ERRORS as exc:
            reason, where = " ".join(str(exc).split()), redact_url(url)
            message = (
                reason if where in reason else f"cannot open checkpoint store {where}: {reason}"
            )
            raise CliError(message, EXIT_USAGE) from exc

    def memory(self, stack: ExitStack, args: argparse.Namespace) -> BaseStore:
        """The long-term memory store (``--store``, default beside the checkpoints)."""
        from aimegraph.memory import open_store
        from aimegraph.memory.store import default_store_url

        url = args.store or default_store_url(args.checkpoints)
        self.opened.append(f"memory store {redact_url(url)}")
        try:
            if self._absent(url):
                return InMemoryStore()
            return stack.enter_context(
                open_store(url, embeddings=args.embeddings, ttl_days=args.memory_ttl_days)
            )
        except (*STORE_ERRORS, ImportError) as exc:
            reason = " ".join(str(exc).split())
            raise CliError(
                f"cannot open memory store {redact_url(url)}: {reason}", EXIT_USAGE
            ) from exc

    def named(self) -> str:
        """The stores opened so far, e.g. ``checkpoint store sqlite:///a.db``."""
        return " or ".join(self.opened) or "the store"

    def _absent(self, url: str) -> bool:
        if self.create:
            return False
        try:
            path = sqlite_file(url)
        except ValueError:  # not a store URL: the opener says so
            return False
        return path is not None and not path.exists()


@contextmanager
def _tracing(endpoint: str | None) -> Iterator[None]:
    """OpenTelemetry spans of the command's runs to ``endpoint`` (OTLP/HTTP)."""
    if not endpoint:
        yield
        return
    try:
        from aimegraph.tracing import enable_tracing
    except ImportError as exc:
        raise CliError(
            f"--otlp needs: pip install 'aimegraph[tracing]' ({exc})", EXIT_USAGE
        ) from exc
    tracing = enable_tracing(endpoint)
    try:
        yield
    finally:
        tracing.shutdown()
