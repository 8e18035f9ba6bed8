"""The sandbox protocol: what a tool asks of a sandbox and what it gets back.

A job is code (``python``) or a command line (``shell``), the workspace its files come
from and go to, and limits. A sandbox runs it confined and returns the outcome. The local
OS sandbox (:class:`~aimegraph.sandbox.bubblewrap.BubblewrapSandbox`) is the default;
anything with ``name``, ``check()`` and ``run()`` can replace it: a container engine,
a remote service (E2B, Modal, Daytona). See :class:`Sandbox`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from aimegraph.sandbox.workspace import Workspace

__all__ = [
    "MAX_OUTPUT_CHARS",
    "Job",
    "Language",
    "Limits",
    "Outcome",
    "Sandbox",
    "SandboxUnavailable",
]

MAX_OUTPUT_CHARS = 1_000_000
"""The default cap on a job's output (stdout and stderr together), in characters: far
above what an observation shows, since the code tools' whole output is kept in the
workspace (``.tool_outputs/``) for the actor to read on; it bounds what a runaway
``print`` loop costs in memory and disk."""

Language = Literal["python", "shell"]
"""``python``: the source is a Python 3 script. ``shell``: a POSIX ``sh`` command line."""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message is one line saying what to install or
    set instead."""


@dataclass(frozen=True)
class Limits:
    """What one job may use.

    Attributes:
        timeout_s: wall-clock seconds; the job is killed after them (CPU time is
            limited to the same, rounded up, plus one).
        memory_mb: address space of each process.
        max_processes: processes the job may have at once (its first one included).
        max_file_mb: size of every file it writes, its output included.
        max_output_chars: characters of stdout plus stderr returned; longer output
            keeps its beginning and end, cut in the middle where a line says so, and
            the outcome's ``output_cut`` is set.
    """

    timeout_s: float = 20.0
    memory_mb: int = 512
    max_processes: int = 64
    max_file_mb: int = 50
    max_output_chars: int = MAX_OUTPUT_CHARS


@dataclass(frozen=True)
class Job:
    """One run: ``source`` in ``language``, with the workspace as working directory
    (its files are the job's input; what the job writes there is its output).

    ``read_only`` pairs a path inside the sandbox with the host directory shown there,
    read-only (an agent skill's folder at ``/skills/<name>``); a sandbox that cannot
    mount directories (``mounts_read_only`` unset) leaves them out."""

    language: Language
    source: str
    workspace: Workspace
    limits: Limits = Limits()
    read_only: tuple[tuple[str, Path], ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What a job did.

    Attributes:
        exit_code: the process's exit status; negative when a signal killed it.
        stdout: its standard output, decoded as UTF-8 and capped (see ``Limits``).
        stderr: its standard error, likewise.
        timed_out: it ran out of wall-clock time and was killed.
        changed_files: workspace paths it created or modified (relative, sorted; empty
            when unknown).
        output_cut: stdout or stderr was longer than its share of
            ``Limits.max_output_chars`` and was cut in the middle.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    changed_files: tuple[str, ...] = ()
    output_cut: bool = False


@runtime_checkable
class Sandbox(Protocol):
    """Runs jobs confined. Implementations must never run a job unconfined because
    their mechanism is missing: they raise :class:`SandboxUnavailable` instead.

    When ``run`` returns, the workspace holds what the job left there: a sandbox that
    shares the directory (a bind mount) has nothing to do; one that runs elsewhere
    copies the workspace in before and the changed files back after.

    A sandbox may also have a ``network`` attribute: when it is False (the sandbox has
    no network), the code tools explain a network error in a job's stderr as that.
    """

    name: str
    """Short name shown in logs and by ``aimegraph demo`` (e.g. ``"bubblewrap"``)."""

    def check(self) -> str:
        """One line saying how jobs are confined here.

        Raises:
            SandboxUnavailable: the mechanism is missing or does not work here.
        """
        ...

    def run(self, job: Job) -> Outcome:
        """Run ``job`` to completion or its timeout and return what it did.

        Raises:
            SandboxUnavailable: as ``check``.
        """
        ...
