"""A tool that runs Python code in a resource-limited subprocess.

Each call starts a fresh ``python -I`` process in its own session, with the
workspace as working directory and HOME, an environment that holds no inherited
variables (so API keys never reach the code), and hard limits on address space,
CPU time, file size and core dumps. Output goes to temporary files capped by the
file-size limit, so a runaway ``print`` loop cannot exhaust the host's memory.

This limits resources and secrets, not file system access: the code runs with the
host user's permissions. Run the engine in a container when the code is untrusted.
POSIX only (it needs :mod:`resource` and process sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.tools.files import Workspace

__all__ = ["make_python_tool"]

# After a kill, how long to wait for the process to be reaped before giving up on it.
_REAP_TIMEOUT_S = 5.0


class _PythonInput(BaseModel):
    code: str = Field(description="Python source to run as a script. Print what you want to see.")


# The child sets its own limits before it reads and runs the code. A preexec_fn
# would do it between fork and exec, which Python documents as unsafe when the
# parent has threads (tools run in thread pools), since the child may deadlock.
# soft == hard, so unprivileged code cannot raise them again.
_BOOTSTRAP = """\
import resource, sys
limits = zip(("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE"), sys.argv[1:5])
for name, value in limits:
    resource.setrlimit(getattr(resource, name), (int(value), int(value)))
source = sys.stdin.read()
sys.argv[:] = ["<code>"]
exec(compile(source, "<code>", "exec"), {"__name__": "__main__"})
"""


def _child_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        # -I hides PYTHON* variables from the child itself; this one is for the
        # interpreters it may start.
        "PYTHONIOENCODING": "utf-8",
        # BLAS thread pools reserve address space per thread and would make
        # `import numpy` fail under a modest RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _read_capped(handle: IO[bytes], limit: int) -> str:
    """The stream's text, keeping its head and tail when it is longer than ``limit``."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    # UTF-8 needs at most 4 bytes per character.
    if size <= 4 * limit:
        text = handle.read().decode("utf-8", errors="replace")
        if len(text) <= limit:
            return text
        head, tail = text[: limit // 2], text[len(text) - limit // 2 :]
    else:
        head = handle.read(2 * limit).decode("utf-8", errors="replace")[: limit // 2]
        handle.seek(-2 * limit, os.SEEK_END)
        end = handle.read().decode("utf-8", errors="replace")
        tail = end[len(end) - limit // 2 :]
    omitted = size - len(head.encode()) - len(tail.encode())
    return f"{head}\n[... output truncated: {omitted} bytes omitted ...]\n{tail}"


def _format(stdout: str, stderr: str) -> str:
    parts = []
    if stdout:
        parts.append(f"--- stdout ---\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"--- stderr ---\n{stderr.rstrip()}")
    return "\n".join(parts) if parts else "(no output)"


def _exit_note(returncode: int, stderr: str, memory_mb: int, file_mb: int) -> str:
    if "MemoryError" in stderr:
        return (
            f"\nnote: the code ran out of memory (limit {memory_mb} MB); "
            "use less memory, e.g. process the data in chunks"
        )
    if "File too large" in stderr:
        return f"\nnote: a file or the output exceeded the {file_mb} MB size limit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:  # real-time signals have no name
            name = f"signal {-returncode}"
        if -returncode in (signal.SIGKILL, signal.SIGXCPU):
            return (
                f"\nnote: the process was killed by {name}; it probably exceeded the CPU "
                f"time or memory ({memory_mb} MB) limit"
            )
        return f"\nnote: the process was killed by {name}"
    return ""


def make_python_tool(
    workspace: Workspace | str | Path,
    *,
    timeout_s: float = 20,
    memory_mb: int = 512,
    max_output_chars: int = 20_000,
    max_file_mb: int = 50,
) -> BaseTool:
    """Build the ``python`` tool.

    Args:
        workspace: directory the code runs in (also its HOME).
        timeout_s: wall-clock limit per call; the whole process group is killed after it.
        memory_mb: address-space limit of the process.
        max_output_chars: most characters of output returned, split between stdout and
            stderr; longer output keeps its beginning and end.
        max_file_mb: size limit for every file the code writes, including its output.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    limits = [
        str(memory_mb * 1024 * 1024),
        # The wall-clock timeout normally fires first; the CPU limit is a backstop.
        str(math.ceil(timeout_s) + 1),
        str(max_file_mb * 1024 * 1024),
        "0",
    ]

    def run(code: str) -> str:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            # -X utf8 because -I ignores PYTHONIOENCODING; -u so output printed before
            # a timeout is not lost in a buffer; the code comes on stdin, which has
            # no length limit unlike an argument.
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-X", "utf8", "-u", "-c", _BOOTSTRAP, *limits],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    cwd=ws.root,
                    env=_child_env(ws.root),
                    start_new_session=True,
                )
            except OSError as exc:
                raise ToolException(f"could not start python: {exc}") from exc
            try:
                proc.communicate(code.encode("utf-8"), timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                partial = _format(
                    _read_capped(out, max_output_chars // 2),
                    _read_capped(err, max_output_chars // 2),
                )
                raise ToolException(
                    f"timed out after {timeout_s:g} s and was killed; make the code faster "
                    f"or split the work into smaller steps. Output before the timeout:\n{partial}"
                ) from None
            # Background processes the code started must not outlive the call.
            _kill_group(proc)
            # Stderr gets its share first: a traceback is the part that must survive.
            stderr = _read_capped(err, max_output_chars // 2)
            stdout = _read_capped(out, max(max_output_chars - len(stderr), max_output_chars // 2))
        note = _exit_note(proc.returncode, stderr, memory_mb, max_file_mb)
        if proc.returncode == 0 and not stderr.strip() and not note:
            # Clean success: the output itself, ready to be quoted or computed with.
            return stdout.rstrip() or "(no output)"
        return f"exit code: {proc.returncode}\n{_format(stdout, stderr)}{note}"

    async def arun(code: str) -> str:
        return await asyncio.to_thread(run, code)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name="python",
        description=(
            "Run a Python 3 script in a fresh process. Returns what it printed; on errors, "
            "also the exit code and stderr. The working directory is the workspace, so "
            "files written with the file tools are visible. Nothing persists between calls "
            "except files. Limits: "
            f"{timeout_s:g} s and {memory_mb} MB of memory; no environment variables are "
            "inherited. "
            "Print the results you need."
        ),
        args_schema=_PythonInput,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The code may have started children of its own; they share the session's group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    # A process stuck in the kernel may survive even SIGKILL; do not hang on it.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_REAP_TIMEOUT_S)
