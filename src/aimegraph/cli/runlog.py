"""Run logs: what the engine and its libraries log while a command runs.

A tool that raises is an error observation for its actor, and the engine logs it
with its traceback (``aimegraph.tools.execution``). In the terminal that would be a
screenful of traceback inside the live view; here each warning or error is one
line on stderr, and the whole record, traceback included, goes to the run log of
the thread it happened in: ``logs/<thread>.log`` beside an SQLite checkpoint file
(``.aimegraph/logs/`` for other stores). The thread comes from the LangGraph run
the record was logged in; records logged outside a run go to ``aimegraph.log``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from aimegraph.checkpoints import sqlite_file

__all__ = ["RunLog", "log_directory", "run_logging"]

DEFAULT_LOG_DIRECTORY = Path(".aimegraph/logs")
_LINE_CHARS = 240
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def log_directory(checkpoints_url: str) -> Path:
    """``logs/`` beside an SQLite checkpoint file, else ``.aimegraph/logs`` (absolute)."""
    try:
        path = sqlite_file(checkpoints_url)
    except ValueError:
        path = None
    return (path.parent / "logs" if path is not None else DEFAULT_LOG_DIRECTORY).absolute()


class RunLog(logging.Handler):
    """Writes each record in full to its thread's run log and one line to ``console``."""

    def __init__(self, directory: Path, console: Console, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.directory = directory
        self.console = console
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            path = self.directory / f"{_file_stem(_thread_of_run())}.log"
            where = f" (trace: {path})"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as log:
                    log.write(self.format(record) + "\n")
            except OSError as exc:  # the line still reaches the console
                where = f" (run log {path} not written: {exc.strerror})"
            line = f"{record.levelname.lower()}: {_one_line(record)}"
            self.console.print(
                line + (where if record.exc_info else ""), markup=False, soft_wrap=True
            )
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)


@contextmanager
def run_logging(directory: Path, console: Console) -> Iterator[RunLog]:
    """A :class:`RunLog` on the root logger for the block (so that no record reaches
    Python's last-resort handler, which prints tracebacks on stderr)."""
    handler = RunLog(directory, console)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        handler.close()


def _thread_of_run() -> str | None:
    """The thread id of the LangGraph run this code runs in, if any."""
    # Imported at the first log line, not with the command: it loads LangGraph's runner.
    from langgraph.config import get_config

    try:
        thread_id = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a run
        return None
    return str(thread_id) if thread_id is not None else None


def _file_stem(thread_id: str | None) -> str:
    return _UNSAFE.sub("_", thread_id) if thread_id else "aimegraph"


def _one_line(record: logging.LogRecord) -> str:
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text += f": {type(exc).__name__}: {exc}"
    flat = " ".join(text.split())
    return flat if len(flat) <= _LINE_CHARS else flat[: _LINE_CHARS - 3] + "..."
