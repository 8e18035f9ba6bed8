"""The sandbox for model-written code, below the tools that use it.

- :mod:`~aimegraph.sandbox.workspace`: the workspace, the one definition of where tools
  may read and write, shared by the file tools and the sandboxes;
- :mod:`~aimegraph.sandbox.protocol`: ``Job`` in, ``Outcome`` out, ``Limits``, and the
  ``Sandbox`` protocol a user's own sandbox implements;
- :mod:`~aimegraph.sandbox.bubblewrap`: the default, an OS sandbox on Linux;
- :mod:`~aimegraph.sandbox.unconfined`: ``sandbox="none"``, the explicit opt-out;
- :mod:`~aimegraph.sandbox.docker`: an example of a sandbox of your own;
- :mod:`~aimegraph.sandbox.mounted`: a sandbox whose jobs also see read-only folders;
- :func:`open_sandbox`: the sandbox a setting names.
"""

from aimegraph.sandbox.bubblewrap import BubblewrapSandbox
from aimegraph.sandbox.docker import DockerSandbox
from aimegraph.sandbox.factory import SANDBOX_NAMES, open_sandbox
from aimegraph.sandbox.mounted import MountedSandbox, mounts_read_only
from aimegraph.sandbox.protocol import (
    MAX_OUTPUT_CHARS,
    Job,
    Language,
    Limits,
    Outcome,
    Sandbox,
    SandboxUnavailable,
)
from aimegraph.sandbox.unconfined import UnconfinedSandbox
from aimegraph.sandbox.workspace import Workspace, WorkspaceError

__all__ = [
    "MAX_OUTPUT_CHARS",
    "SANDBOX_NAMES",
    "BubblewrapSandbox",
    "DockerSandbox",
    "Job",
    "Language",
    "Limits",
    "MountedSandbox",
    "Outcome",
    "Sandbox",
    "SandboxUnavailable",
    "UnconfinedSandbox",
    "Workspace",
    "WorkspaceError",
    "mounts_read_only",
    "open_sandbox",
]
