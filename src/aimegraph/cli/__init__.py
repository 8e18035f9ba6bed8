"""``aimegraph``: run, demo, resume, cancel, inspect and draw workflows from the terminal.

One module per command group: ``runs`` (run, demo, resume, fork, cancel), ``threads``
(threads, show, history, wait, draw), ``dashboard``, ``distributed`` (submit, worker),
``memory``, ``optimize``, ``prompts``, ``eval``; ``app`` builds the parser (a group's
module is imported only when one of its commands is parsed) and ``execute`` runs the
parsed command.

Exit codes tell outcomes apart: 0 succeeded, 1 failed, 2 usage error, 3 rejected,
4 budget exhausted, 5 paused (waiting for a human: see ``aimegraph resume``),
6 unknown thread or nothing to resume, 7 ``wait --timeout`` gave up, 8 cancelled,
9 thread busy (another process runs it), 10 blocked by a guardrail, 130 / 143 stopped by
SIGINT / SIGTERM (resumable).
"""

from aimegraph.cli.app import EXTRA_OF_MODULE, build_parser, main, missing_extra_message

__all__ = ["EXTRA_OF_MODULE", "build_parser", "main", "missing_extra_message"]
