"""``sandbox="none"``: the explicit opt-out. Jobs run as ordinary processes of the host
user, with the limits on memory, CPU time and file size, a clean environment and the
workspace as working directory, but with the host's file system, network and processes
within reach. For hosts without the OS mechanism (macOS, a container that is itself the
sandbox). Every job logs a warning, so the choice never goes unnoticed.
"""

from __future__ import annotations

import logging
import os
import sys

from aimegraph.sandbox.process import job_environment, launcher_command, run_process
from aimegraph.sandbox.protocol import Job, Outcome

__all__ = ["UnconfinedSandbox"]

logger = logging.getLogger(__name__)


class UnconfinedSandbox:
    """Runs jobs without confinement (see the module docstring)."""

    name = "none"

    def __repr__(self) -> str:
        return "UnconfinedSandbox()"

    def check(self) -> str:
        return (
            "none: model-written code runs UNCONFINED, with the host's files, network and "
            "processes within reach (only memory, CPU time and file size are limited)"
        )

    def run(self, job: Job) -> Outcome:
        logger.warning(
            'sandbox="none": running model-written %s code UNCONFINED in %s; it can read and '
            "write the host's files and reach the network",
            job.language,
            job.workspace.root,
        )
        root = job.workspace.root
        return run_process(
            # No RLIMIT_NPROC: outside a user namespace it counts all the user's processes.
            launcher_command(sys.executable, job, max_processes=False),
            job,
            env=job_environment(root, os.environ.get("PATH", os.defpath)),
            cwd=root,
        )
