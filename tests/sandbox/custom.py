"""A sandbox of a user's own, named as ``AimeConfig(sandbox="tests.sandbox.custom:...")``."""

from __future__ import annotations

from aimegraph.sandbox import Job, Outcome, UnconfinedSandbox


class RecordingSandbox:
    """Runs jobs as ``sandbox="none"`` does and records them (class-wide, since the
    engine makes the instance from this class)."""

    name = "recording"
    jobs: list[Job] = []

    def check(self) -> str:
        return "recording: jobs run unconfined and are recorded"

    def run(self, job: Job) -> Outcome:
        RecordingSandbox.jobs.append(job)
        return UnconfinedSandbox().run(job)


NOT_A_SANDBOX = object()
