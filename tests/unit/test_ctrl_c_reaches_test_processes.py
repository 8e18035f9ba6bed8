"""Issue 47, point 13: three tests of Ctrl-C failed in a full run and passed alone. The
suite had been started as a background job, which inherits SIGINT ignored from its
shell, and so did every process those tests started: the driver's run never drained
(exit 0, not 130), the eval recorded every rollout, the dashboard never re-raised its
Ctrl-C. ``tests/conftest.py`` gives the tests' processes Ctrl-C as a terminal would;
this fails without it, when the suite runs as such a job."""

from __future__ import annotations

import subprocess
import sys

SHOWS_SIGINT = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def test_a_process_a_test_starts_takes_ctrl_c() -> None:
    shown = subprocess.run(
        [sys.executable, "-c", SHOWS_SIGINT], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "True"
