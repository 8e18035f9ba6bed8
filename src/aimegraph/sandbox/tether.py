"""Tying a job's processes to the engine process: when the engine dies, however it dies,
nothing the job started lives on.

What a sandbox does by itself leaves a window. bubblewrap's ``--die-with-parent`` is the
kernel's parent-death signal, which each process arms for itself, late: bwrap arms it
only after it has created the sandbox's init, and that init arms its own only after bwrap
has let it go on (once the user namespace is set up). An engine killed before bwrap armed
it (a SIGKILL just after the start) leaves bwrap to the system's init; one killed later
kills bwrap while the sandbox's init still waits for it, and that init then waits
forever, adopted by the system's init. ``sandbox="none"`` has no such signal at all.

So a job's command runs under a tether: a small process, the engine's child, that starts
the command as its own child and is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``):
whatever the command orphans (bwrap's init once bwrap is gone, a job's background
process) comes to the tether instead of the system's init. It holds the read end of a
pipe whose write end only the engine holds (the lifeline). The kernel closes that end the
moment the engine dies, whatever killed it, so the end of file says so without a race:
there is no parent pid to check after arming a signal. The engine also closes it when a
call ends early (its timeout). Either way the tether kills its children, and the orphans
that come to it as they die, until none is left, and exits. When the command ends by
itself the tether does the same with what the command left behind, and ends as the
command ended (its exit code, or killed by the same signal).

Linux only (a subreaper, pidfds); elsewhere :func:`tethered` returns the command as it is.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import sys
from collections.abc import Sequence

__all__ = ["TETHER_AVAILABLE", "tethered"]

TETHER_AVAILABLE = sys.platform == "linux" and hasattr(os, "pidfd_open")

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>

# The tether's program, run with -I -S: it starts in a few milliseconds and imports
# nothing of the host's site. The numbers it needs come first (_constants), written in:
# importing `signal` would double its start-up time.
_PROGRAM = """\
import ctypes, os, select, sys
lifeline, command = int(sys.argv[1]), sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit(f"tether: cannot become a subreaper: {os.strerror(ctypes.get_errno())}")
try:
    # The signals Python ignores go back to their defaults, as subprocess does.
    child = os.posix_spawnp(command[0], command, os.environ, setsigdef=IGNORED_BY_PYTHON)
except OSError as exc:
    sys.exit(f"tether: cannot run {command[0]}: {exc}")
# Only the command keeps the descriptors handed down (a pipe's reader waits for its end).
os.close(0)
os.closerange(3, lifeline)
os.closerange(lifeline + 1, os.sysconf("SC_OPEN_MAX"))
exited = os.pidfd_open(child)
ready = select.select([exited, lifeline], [], [])[0]
status = os.waitpid(child, 0)[1] if exited in ready else None


def children():
    me = str(os.getpid())
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[1] == me:
                yield int(name)


# Kill what is left; what a killed process orphans comes here, and goes the same way.
while True:
    try:
        reaped = os.waitpid(-1, os.WNOHANG)[0]
    except ChildProcessError:
        break
    if not reaped:
        for pid in list(children()):
            try:
                os.kill(pid, KILL)
            except ProcessLookupError:
                pass
        try:
            os.wait()
        except ChildProcessError:
            break
if status is not None and os.WIFEXITED(status):
    os._exit(os.WEXITSTATUS(status))
# Killed (by a signal, or here when the lifeline ended it): end the same way, so the
# engine sees what it would see without a tether. No core file lands in the workspace.
import resource, signal
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
number = os.WTERMSIG(status) if status is not None else KILL
if number != KILL:
    signal.signal(number, signal.SIG_DFL)
os.kill(os.getpid(), number)
os._exit(128 + number)
"""


@functools.cache
def _constants() -> str:
    ignored = (int(signal.SIGPIPE), int(signal.SIGXFSZ))
    return (
        f"SUBREAPER, KILL, IGNORED_BY_PYTHON = "
        f"{_PR_SET_CHILD_SUBREAPER}, {int(signal.SIGKILL)}, {ignored}\n"
    )


def tethered(command: Sequence[str], lifeline: int, *, path: str | None) -> list[str]:
    """``command`` run under a tether that ends it, and everything it starts, once
    ``lifeline`` (the read end of a pipe; the caller keeps the write end and hands this
    end down to the process) reads end of file. ``command`` itself where there is no
    tether (not Linux).

    Args:
        command: the program and its arguments.
        lifeline: the descriptor the tether watches.
        path: the ``PATH`` the command is looked up on (the process's environment's).

    Raises:
        FileNotFoundError: the program is not found (as starting it directly would).
    """
    if not TETHER_AVAILABLE:
        return list(command)
    program = command[0]
    if shutil.which(program, path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return [sys.executable, "-I", "-S", "-c", _constants() + _PROGRAM, str(lifeline), *command]
