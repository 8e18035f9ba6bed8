"""A sandbox whose every job also sees some host directories, read-only.

The code tools build their jobs knowing only the workspace; agent skills add their
folders to each job here, so neither tool changes, and a skill never widens what a job
may write: the folders are read-only binds, and only in a sandbox that can mount them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from aimegraph.sandbox.protocol import Job, Outcome, Sandbox

__all__ = ["MountedSandbox", "mounts_read_only"]


def mounts_read_only(sandbox: Sandbox) -> bool:
    """Whether ``sandbox`` shows a job's ``read_only`` directories at their sandbox paths."""
    return bool(getattr(sandbox, "mounts_read_only", False))


class MountedSandbox:
    """``inner``, with ``read_only`` (sandbox path, host directory) added to every job."""

    def __init__(self, inner: Sandbox, read_only: tuple[tuple[str, Path], ...]) -> None:
        self.inner = inner
        self.read_only = read_only
        self.name = inner.name
        self.mounts_read_only = mounts_read_only(inner)

    def __repr__(self) -> str:
        return f"MountedSandbox({self.inner!r}, {len(self.read_only)} read-only directories)"

    @property
    def network(self) -> bool | None:
        """The inner sandbox's ``network`` (the code tools explain network errors by it)."""
        return getattr(self.inner, "network", None)

    def check(self) -> str:
        return self.inner.check()

    def run(self, job: Job) -> Outcome:
        return self.inner.run(replace(job, read_only=(*job.read_only, *self.read_only)))
