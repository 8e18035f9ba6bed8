"""``aimegraph feedback THREAD --rating 1-5 [--note TEXT]``: a user's verdict on a run,
stored in the memory store beside its episodes; a low rating or a correction becomes
a lesson for the planner of the next similar goal (see
:mod:`aimegraph.memory.feedback`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console

from aimegraph.checkpoints import ThreadNotFoundError
from aimegraph.cli.support import EXIT_NOT_FOUND, AddCommand, CliError
from aimegraph.memory.feedback import feedback_lesson
from aimegraph.steering import feedback

__all__ = ["register"]


def register(command: AddCommand) -> None:
    """Add ``feedback``."""
    parser = command("feedback", cmd_feedback)
    parser.add_argument("thread", help="the thread whose latest run is rated")
    parser.add_argument(
        "--rating", type=int, required=True, choices=range(1, 6), metavar="1-5",
        help="how good the run was: 1 (useless) to 5 (right)",
    )  # fmt: skip
    parser.add_argument("--note", default="", help="what was wrong, or what the right answer is")
    parser.add_argument("--user", help="memory scope (default: the run's user_id, else 'default')")


def cmd_feedback(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    try:
        verdict = feedback(
            saver, args.memory_store(), args.thread, args.rating, args.note, user_id=args.user
        )
    except ThreadNotFoundError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    lesson = feedback_lesson(verdict)
    if args.json:
        print(json.dumps(verdict.model_dump(mode="json") | {"lesson": bool(lesson)}))
    else:
        taught = "; it is a lesson for the next similar goal" if lesson else ""
        console.print(f"feedback on {args.thread}: {verdict.rating}/5 stored{taught}", markup=False)
    return 0
