"""The ``shell`` tool (opt-in bundle ``shell``): a POSIX ``sh`` command line per call, in
the same sandbox and under the same limits as the ``python`` tool, for work that wants
``grep``, ``sort``, ``wc`` or a build command."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from aimegraph.sandbox import Limits, Sandbox, Workspace
from aimegraph.tools.code import make_code_tool

__all__ = ["SHELL_BUNDLE", "SHELL_BUNDLE_DESCRIPTION", "make_shell_tool"]

SHELL_BUNDLE = "shell"
SHELL_BUNDLE_DESCRIPTION = (
    "Shell commands (grep, sort, wc, awk, sed, build tools) on workspace files."
)

# An argument longer than this cannot be passed to sh (Linux's MAX_ARG_STRLEN is 128 KiB).
_MAX_COMMAND_CHARS = 100_000


class _ShellInput(BaseModel):
    command: str = Field(
        max_length=_MAX_COMMAND_CHARS,
        description="A POSIX sh command line, run in the workspace; print what you want to see.",
    )


def make_shell_tool(
    workspace: Workspace | str | Path,
    *,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
) -> BaseTool:
    """Build the ``shell`` tool.

    Args:
        workspace: the commands' working directory (also their HOME), and the only
            host directory they may write.
        sandbox: where the commands run (default: ``open_sandbox("auto")``, bubblewrap).
        limits: time, memory, processes, file size and output per call (default:
            ``Limits()``, those of the ``python`` tool).
    """
    limits = limits or Limits()
    return make_code_tool(
        name="shell",
        language="shell",
        description=(
            "Run a POSIX sh command line (pipes, redirections, coreutils, grep, sed, awk) "
            "with the workspace as working directory. Returns what it printed; on errors, "
            f"also the exit code and stderr. Limits: {limits.timeout_s:g} s and "
            f"{limits.memory_mb} MB of memory; no environment variables are inherited."
        ),
        args_schema=_ShellInput,
        workspace=workspace,
        sandbox=sandbox,
        limits=limits,
    )
