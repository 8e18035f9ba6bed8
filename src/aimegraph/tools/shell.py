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
    timeout_s: float = 20,
    memory_mb: int = 512,
    max_output_chars: int = 20_000,
    max_file_mb: int = 50,
    max_processes: int = 64,
) -> BaseTool:
    """Build the ``shell`` tool; the arguments are those of
    :func:`~aimegraph.tools.python.make_python_tool`."""
    limits = Limits(timeout_s, memory_mb, max_processes, max_file_mb, max_output_chars)
    return make_code_tool(
        name="shell",
        language="shell",
        description=(
            "Run a POSIX sh command line (pipes, redirections, coreutils, grep, sed, awk) "
            "with the workspace as working directory. Returns what it printed; on errors, also the "
            f"exit code and stderr. Limits: {timeout_s:g} s and {memory_mb} MB of memory; "
            "no environment variables are inherited."
        ),
        args_schema=_ShellInput,
        workspace=workspace,
        sandbox=sandbox,
        limits=limits,
    )
