"""Issue 47, point 14: no process of a sandboxed call outlives the process that made the
call, wherever that process dies. A bwrap of the python tool was found alive 40 minutes
after its engine had been killed: the sandbox's init, adopted by the system's init,
waiting for a bwrap that was gone.

A driver process makes one call and kills itself (SIGKILL) at one point of it: right
after starting the job's process, once bwrap has reported its sandbox's init, once the job
runs, once the job has a detached process of its own. A bwrap held (``--userns-block-fd``)
between creating the init and letting it go on pins the window the leak came from. Then
nothing whose working directory or command line names the workspace may be left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aimegraph.sandbox import BubblewrapSandbox
from tests.host import left_running

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import os, signal, subprocess, sys, threading, time
from pathlib import Path
from aimegraph.sandbox import BubblewrapSandbox, Job, Limits, UnconfinedSandbox, Workspace
from aimegraph.sandbox import bubblewrap

sandbox_name, point, workspace, code = sys.argv[1:5]  # sandbox: "none" or a bwrap
if sandbox_name == "none":
    sandbox = UnconfinedSandbox()
else:
    sandbox = BubblewrapSandbox(bwrap=sandbox_name)
sandbox.check()  # its probes start processes too: before the points below


def die():
    os.kill(os.getpid(), signal.SIGKILL)


if point == "spawned":
    class DiesOnceStarted(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            die()

    subprocess.Popen = DiesOnceStarted
elif point == "init reported":
    report = bubblewrap._Pipes.started

    def started(self, proc):
        report(self, proc)
        die()

    bubblewrap._Pipes.started = started
else:
    marker = Path(workspace) / "running"

    def once_running():
        while not marker.exists():
            time.sleep(0.01)
        die()

    threading.Thread(target=once_running, daemon=True).start()
sandbox.run(Job("python", code, Workspace(Path(workspace)), Limits(timeout_s=600)))
"""

RUNS = 'import time\nopen("running", "w").close()\ntime.sleep(600)\n'

# A detached grandchild (its own session, its parent gone) says it runs.
DETACHES = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open("running", "w").close()
        time.sleep(600)
    os._exit(0)
time.sleep(600)
"""

CODE = {"spawned": RUNS, "init reported": RUNS, "job runs": RUNS, "job detached": DETACHES}

# bwrap, stopped where it has created the sandbox's init and not yet let it go on: it
# waits for a byte on a fifo nobody writes to (an option that excludes --disable-userns).
HELD_BWRAP = """#!/bin/sh
case " $* " in
  *" --info-fd "*)
    for arg do shift; [ "$arg" = --disable-userns ] || set -- "$@" "$arg"; done
    exec 9<>"$0.fifo"
    exec bwrap --userns-block-fd 9 "$@" ;;
  *) exec bwrap "$@" ;;
esac
"""


def _killed_at(sandbox: str, point: str, tmp_path: Path) -> dict[int, str]:
    """Run the driver (``sandbox``: "none" or the bwrap to use) until it kills itself at
    ``point``; what of its call is left once nothing more goes (or 30 s passed)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    driver = subprocess.run(
        [sys.executable, "-c", DRIVER, sandbox, point, str(workspace), CODE[point]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert driver.returncode == -signal.SIGKILL, driver.stderr[-3000:]
    return left_running(workspace)


@pytest.mark.parametrize("point", list(CODE))
def test_nothing_of_a_sandboxed_call_outlives_its_killed_caller(
    bubblewrap: BubblewrapSandbox, point: str, tmp_path: Path
) -> None:
    assert _killed_at(shutil.which("bwrap") or "bwrap", point, tmp_path) == {}


def test_nothing_outlives_a_caller_killed_while_bwrap_holds_the_sandbox_init(
    bubblewrap: BubblewrapSandbox, tmp_path: Path
) -> None:
    held = tmp_path / "held-bwrap"
    held.write_text(HELD_BWRAP)
    held.chmod(0o755)
    os.mkfifo(f"{held}.fifo")
    assert _killed_at(str(held), "init reported", tmp_path) == {}


@pytest.mark.parametrize("point", ["spawned", "job runs", "job detached"])
def test_nothing_of_an_unconfined_call_outlives_its_killed_caller(
    point: str, tmp_path: Path
) -> None:
    if sys.platform != "linux":
        pytest.skip("the tether is Linux only")
    assert _killed_at("none", point, tmp_path) == {}
