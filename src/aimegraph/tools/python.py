"""The ``python`` tool: a Python 3 script per call, in the sandbox.

Each call is a fresh interpreter of the Python installation in use (so the packages of
the engine's environment import), confined by the run's sandbox
(:mod:`aimegraph.sandbox`; by default bubblewrap: the workspace and nothing else of the
host's files, no network, its own processes), with the workspace as working directory
and HOME, no inherited environment variables, and limits on time, memory, processes and
file size.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from aimegraph.sandbox import MAX_OUTPUT_CHARS, Limits, Sandbox, Workspace
from aimegraph.tools.code import make_code_tool

__all__ = ["make_python_tool"]


class _PythonInput(BaseModel):
    code: str = Field(description="Python source to run as a script. Print what you want to see.")


def make_python_tool(
    workspace: Workspace | str | Path,
    *,
    sandbox: Sandbox | None = None,
    timeout_s: float = 20,
    memory_mb: int = 512,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    max_file_mb: int = 50,
    max_processes: int = 64,
) -> BaseTool:
    """Build the ``python`` tool.

    Args:
        workspace: directory the code runs in (also its HOME), and the only host
            directory it may write.
        sandbox: where the code runs (default: ``open_sandbox("auto")``, bubblewrap).
        timeout_s: wall-clock limit per call; everything the code started is killed
            after it.
        memory_mb: address-space limit of each process.
        max_output_chars: most characters of output returned, split between stdout and
            stderr; longer output keeps its beginning and end, and a note says it was
            cut at this cap.
        max_file_mb: size limit for every file the code writes, including its output.
        max_processes: processes and threads the code may have at once.
    """
    limits = Limits(timeout_s, memory_mb, max_processes, max_file_mb, max_output_chars)
    return make_code_tool(
        name="python",
        language="python",
        description=(
            "Run a Python 3 script in a fresh process. Returns what it printed; on errors, "
            "also the exit code and stderr. The working directory is the workspace, so "
            "files written with the file tools are visible. Nothing persists between calls "
            "except files. Limits: "
            f"{timeout_s:g} s and {memory_mb} MB of memory; no environment variables are "
            "inherited. Print the results you need."
        ),
        args_schema=_PythonInput,
        workspace=workspace,
        sandbox=sandbox,
        limits=limits,
    )
