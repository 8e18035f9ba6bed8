"""Host-side views the sandbox tests judge by (never what the sandboxed code prints)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (zombies have none: they are dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def processes_in(directory: Path) -> dict[int, str]:
    """Live host processes (not zombies) whose working directory is in ``directory`` or
    whose command line names it: pid -> command line (cut)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or a zombie
            continue
        if state != "Z" and (Path(cwd).is_relative_to(directory) or str(directory) in cmdline):
            found[int(entry.name)] = cmdline[:200]
    return found


def left_running(directory: Path, timeout_s: float = 30) -> dict[int, str]:
    """:func:`processes_in` ``directory`` once there are none (or ``timeout_s`` passed:
    those are killed, so no test leaves them behind)."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left
