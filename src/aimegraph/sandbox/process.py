"""Running a job as a local process: the launcher that sets the limits, the clean
environment, output capture, the timeout, and the tether (:mod:`~aimegraph.sandbox.tether`)
that ends whatever the job started once the call ends or the engine dies. Shared by the
local sandboxes (bubblewrap and the unconfined opt-out) and usable by others that start a
local client process.
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from aimegraph.sandbox.protocol import Job, Outcome
from aimegraph.sandbox.tether import TETHER_AVAILABLE, tethered

__all__ = ["job_environment", "launcher_command", "run_process"]

# After a kill, how long to wait for the process to be reaped before giving up on it.
REAP_TIMEOUT_S = 5.0

# The job's first process sets its own limits before it runs anything: a preexec_fn
# would do it between fork and exec, which Python documents as unsafe when the parent
# has threads (tools run in thread pools). soft == hard, so the code cannot raise them.
# A shell job's command comes on stdin like code, then replaces the launcher. With a
# ready fd, the launcher first tells its sandbox it runs (then closes the fd: the code
# never sees it), which tells the sandbox's own failures from the job's.
_LAUNCHER = """\
import os, resource, sys
language, ready, *limits = sys.argv[1:]
if ready != "-":
    os.write(int(ready), b"1")
    os.close(int(ready))
names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")
for name, value in zip(names, limits):
    if value != "-":
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))
source = sys.stdin.buffer.read().decode("utf-8")
if language == "shell":
    os.execv("/bin/sh", ["sh", "-c", source])
sys.argv[:] = ["<code>"]
exec(compile(source, "<code>", "exec"), {"__name__": "__main__"})
"""


def launcher_command(
    python: str, job: Job, *, max_processes: bool, ready_fd: int | None = None
) -> list[str]:
    """The command that runs ``job`` under its limits with the interpreter ``python``
    (its source goes to the command's stdin).

    Args:
        python: the interpreter, as the sandbox sees it.
        job: the job.
        max_processes: also set ``RLIMIT_NPROC``. Only where the job has a user
            namespace of its own: elsewhere the kernel counts every process of the
            user, and for root it bounds nothing.
        ready_fd: an inherited descriptor the launcher writes one byte to, then closes,
            before anything else.
    """
    limits = job.limits
    values = [
        str(limits.memory_mb * 1024 * 1024),
        # The wall-clock timeout normally fires first; the CPU limit is a backstop.
        str(math.ceil(limits.timeout_s) + 1),
        str(limits.max_file_mb * 1024 * 1024),
        "0",
        # The sandbox's init runs as the job's uid and counts: the job keeps its budget.
        str(limits.max_processes + 1) if max_processes else "-",
    ]
    # Python: -X utf8 because -I ignores PYTHONIOENCODING; -u so output printed before a
    # timeout is not lost in a buffer. Shell: no site-packages (-S), it needs none and
    # the launcher starts faster.
    flags = ["-I", "-X", "utf8", "-u"] if job.language == "python" else ["-I", "-S"]
    ready = str(ready_fd) if ready_fd is not None else "-"
    return [python, *flags, "-c", _LAUNCHER, job.language, ready, *values]


def job_environment(home: Path, path: str) -> dict[str, str]:
    """The whole environment of a job: nothing inherited, so secrets never reach it."""
    return {
        "PATH": path,
        "LANG": "C.UTF-8",
        "HOME": str(home),
        # -I hides PYTHON* variables from the launcher itself; this one is for the
        # interpreters the code may start.
        "PYTHONIOENCODING": "utf-8",
        # BLAS thread pools reserve address space per thread and would make
        # `import numpy` fail under a modest RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


Finish = Callable[[], None]
"""Called once the process has ended (or was killed): waits until nothing of the job is
left running."""


def run_process(
    command: Sequence[str],
    job: Job,
    *,
    env: dict[str, str],
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
    started: Callable[[subprocess.Popen[bytes]], Finish] | None = None,
) -> Outcome:
    """Run ``command`` with ``job.source`` on its stdin, in a session of its own, and
    return its outcome with output capped by ``job.limits``. Output goes to temporary
    files, whose size the job's file-size limit caps, so a runaway ``print`` loop cannot
    exhaust memory.

    Args:
        command: the program and its arguments.
        job: the job (its source, workspace and limits).
        env: the process's whole environment.
        cwd: its working directory (default: ours).
        pass_fds: file descriptors it inherits.
        started: called right after the start with the process; returns what to call
            once it has ended (or was killed at the timeout).

    Raises:
        OSError: the command could not be started.
    """
    limits = job.limits
    before = job.workspace.file_states()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Only this process holds the lifeline's write end: its end of file (the call
        # ended, or this process died) ends everything the job started.
        lifeline, holding = os.pipe()
        try:
            proc = subprocess.Popen(
                tethered(command, lifeline, path=env.get("PATH", os.defpath)),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=env,
                start_new_session=True,
                pass_fds=(*pass_fds, lifeline),
            )
        except BaseException:
            os.close(holding)
            raise
        finally:
            os.close(lifeline)
        finish: Finish | None = None
        try:
            finish = started(proc) if started is not None else None
            # The source comes on stdin, which has no length limit unlike an argument.
            timed_out = not _feed_and_wait(proc, job.source.encode("utf-8"), limits.timeout_s)
        finally:
            _end_job(proc, holding)
            if finish is not None:
                finish()
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]  # Popen(stdin=PIPE)
        # Stderr gets its share first: a traceback is the part that must survive.
        stderr, stderr_cut = _read_capped(err, limits.max_output_chars // 2)
        stdout, stdout_cut = _read_capped(
            out, max(limits.max_output_chars - len(stderr), limits.max_output_chars // 2)
        )
    return Outcome(
        exit_code=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        changed_files=job.workspace.changed_since(before),
        output_cut=stdout_cut or stderr_cut,
    )


def _feed_and_wait(proc: subprocess.Popen[bytes], data: bytes, timeout_s: float) -> bool:
    """Write ``data`` to the process's stdin, close it, and wait for the process to
    exit; False when ``timeout_s`` passed first.

    ``Popen.communicate(timeout=...)`` polls for the exit with sleeps that grow to 50 ms
    (6-7 ms more per median call, measured); a pidfd wakes the wait the moment the process
    exits. Where there is none (not Linux), ``communicate`` it is.
    """
    assert proc.stdin is not None
    if not hasattr(os, "pidfd_open"):
        try:
            proc.communicate(data, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout_s
    stdin = proc.stdin.fileno()
    os.set_blocking(stdin, False)
    pending = memoryview(data)
    with selectors.DefaultSelector() as selector, _pidfd(proc.pid) as exited:
        selector.register(exited, selectors.EVENT_READ)
        selector.register(stdin, selectors.EVENT_WRITE)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready = {key.fd for key, _ in selector.select(remaining)}
            if exited in ready:
                break
            if stdin in ready:
                try:
                    pending = pending[os.write(stdin, pending) :]
                except BrokenPipeError:  # it exited or closed stdin: the rest is not needed
                    pending = pending[:0]
                if not pending:
                    selector.unregister(stdin)
                    proc.stdin.close()
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    proc.wait()
    return True


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int]:
    fd = os.pidfd_open(pid)
    try:
        yield fd
    finally:
        os.close(fd)


def _end_job(proc: subprocess.Popen[bytes], lifeline: int) -> None:
    """End whatever is left of the job: the tether kills it all when its lifeline
    closes; then its session's group goes too (the tether itself if it hangs, the job
    where there is no tether)."""
    os.close(lifeline)
    # A process stuck in the kernel may survive even SIGKILL; do not hang on it.
    if TETHER_AVAILABLE:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=REAP_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=REAP_TIMEOUT_S)


def _read_capped(handle: IO[bytes], limit: int) -> tuple[str, bool]:
    """The stream's text, and whether it was longer than ``limit`` characters: then
    its head and tail around a line saying how much was cut there. At most about
    4 x ``limit`` bytes are read, however long the stream."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    # UTF-8 needs at most 4 bytes per character.
    if size <= 4 * limit:
        text = handle.read().decode("utf-8", errors="replace")
        if len(text) <= limit:
            return text, False
        head, tail = text[: limit // 2], text[len(text) - limit // 2 :]
    else:
        head = handle.read(2 * limit).decode("utf-8", errors="replace")[: limit // 2]
        handle.seek(-2 * limit, os.SEEK_END)
        end = handle.read().decode("utf-8", errors="replace")
        tail = end[len(end) - limit // 2 :]
    omitted = size - len(head.encode()) - len(tail.encode())
    return f"{head}\n[... output cut here: {omitted} bytes left out ...]\n{tail}", True
