"""A sandbox of your own, by example: jobs in a Docker container.

The pattern for any container engine or remote service (E2B, Modal, Daytona): implement
``name``, ``check()`` and ``run(job) -> Outcome`` (:class:`~aimegraph.sandbox.Sandbox`)
and pass the object as ``build_aime_graph(tools=default_registry(..., sandbox=...))`` or
name it in ``AimeConfig(sandbox="module:attr")``. Here the workspace goes in and comes back
through a bind mount at its real path; a remote service would upload the workspace before
the job and write ``Outcome.changed_files`` back after. The same launcher as the local
sandboxes sets the limits inside, so only the image's ``python3`` is needed.

Docker's own isolation (namespaces, cgroups, a seccomp profile, no capabilities here)
confines the job; the engine runs as root, so anyone who may use it is root-equivalent.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid

from aimegraph.sandbox.process import Finish, job_environment, launcher_command, run_process
from aimegraph.sandbox.protocol import Job, Outcome, SandboxUnavailable

__all__ = ["DockerSandbox"]


class DockerSandbox:
    """Runs jobs with ``docker run`` in ``image``.

    Args:
        image: an image with ``python3`` and ``/bin/sh`` (pull it beforehand: a job's
            timeout does not cover a pull).
        network: give jobs a network (Docker's default bridge); off: ``--network none``.
        docker: the Docker CLI.
    """

    name = "docker"

    def __init__(
        self, image: str = "python:3.12-slim", *, network: bool = False, docker: str = "docker"
    ) -> None:
        self.image, self.network, self.docker = image, network, docker

    def __repr__(self) -> str:
        return f"DockerSandbox({self.image!r}, network={self.network})"

    def check(self) -> str:
        try:
            done = subprocess.run(
                [self.docker, "version", "--format", "{{.Server.Version}}"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"the Docker CLI ({self.docker}) does not run: {exc}") from exc
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no error message"])[-1]
            raise SandboxUnavailable(f"no Docker engine answers: {reason}")
        network = "bridge network" if self.network else "no network"
        return f"docker {done.stdout.strip()}, image {self.image}: workspace mounted, {network}"

    def command(self, job: Job, container: str) -> list[str]:
        """The ``docker run`` command line of ``job`` in a container named ``container``."""
        root, limits = str(job.workspace.root), job.limits
        env = job_environment(job.workspace.root, "/usr/local/bin:/usr/bin:/bin")
        return [
            self.docker, "run", "--rm", "--interactive", "--name", container,
            "--network", "bridge" if self.network else "none",
            "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m",
            "--pids-limit", str(limits.max_processes),
            "--read-only", "--tmpfs", f"/tmp:size={limits.memory_mb}m",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            # The caller's uid: files written in the workspace stay the caller's.
            "--user", f"{os.getuid()}:{os.getgid()}",
            "--volume", f"{root}:{root}", "--workdir", root,
            *(arg for name, value in env.items() for arg in ("--env", f"{name}={value}")),
            self.image,
            *launcher_command("python3", job, max_processes=False),
        ]  # fmt: skip

    def run(self, job: Job) -> Outcome:
        container = f"aimegraph-{uuid.uuid4().hex[:12]}"

        def started(proc: subprocess.Popen[bytes]) -> Finish:
            # Killing the client at a timeout leaves the container running: remove it.
            def remove() -> None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(
                        [self.docker, "rm", "--force", container],
                        capture_output=True,
                        timeout=30,
                    )

            return remove

        try:
            # The client needs the host's Docker settings; the container gets only --env.
            return run_process(
                self.command(job, container), job, env=dict(os.environ), started=started
            )
        except OSError as exc:
            raise SandboxUnavailable(f"the Docker CLI ({self.docker}) does not run: {exc}") from exc
