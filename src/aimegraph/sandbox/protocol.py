"""The sandbox protocol: what a tool asks of a sandbox and what it gets back.

A job is code (``python``) or a command line (``shell``), the workspace its files come
from and go to, and limits. A sandbox runs it confined and returns the outcome. The local
OS sandbox (:class:`~aimegraph.sandbox.bubblewrap.BubblewrapSandbox`) is the default;
anything with ``name``, ``check()`` and ``run()`` can replace it: a container engine,
a remote service (E2B, Modal, Daytona). See :class:`Sandbox`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from aimegraph.sandbox.workspace import Workspace

__all__ = ["Job", "Language", "Limits", "Outcome", "Sandbox", "SandboxUnavailable"]

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
            keeps its beginning and end.
    """

    timeout_s: float = 20.0
    memory_mb: int = 512
    max_processes: int = 64
    max_file_mb: int = 50
    max_output_chars: int = 20_000


@dataclass(frozen=True)
class Job:
    """One run: ``source`` in ``language``, with the workspace as working directory
    (its files are the job's input; what the job writes there is its output)."""

    language: Language
    source: str
    workspace: Workspace
    limits: Limits = Limits()


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
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    changed_files: tuple[str, ...] = ()


@runtime_checkable
class Sandbox(Protocol):
    """Runs jobs confined. Implementations must never run a job unconfined because
    their mechanism is missing: they raise :class:`SandboxUnavailable` instead.

    When ``run`` returns, the workspace holds what the job left there: a sandbox that
    shares the directory (a bind mount) has nothing to do; one that runs elsewhere
    copies the workspace in before and the changed files back after.
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
