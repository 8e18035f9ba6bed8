"""The verifier's tools: look at what a run left in the workspace without changing it
(``list_dir``, ``read_lines``, whose numbered lines a verdict can cite) and recompute
a figure (``python``)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.tools.files import Workspace, make_file_tools
from aimegraph.tools.python import make_python_tool

__all__ = ["make_inspection_tools", "make_line_reader"]

MAX_LINES = 400
"""Most lines one ``read_lines`` call shows."""


class _ReadLinesInput(BaseModel):
    path: str = Field(description="File path relative to the workspace root.")
    start: int = Field(default=1, ge=1, description="First line to show (1-based).")
    count: int = Field(
        default=200, ge=1, le=MAX_LINES, description=f"Lines to show, at most {MAX_LINES}."
    )


def make_line_reader(workspace: Workspace | str | Path, *, max_line_chars: int = 500) -> BaseTool:
    """The ``read_lines`` tool: a text file's lines with their numbers (``   12| text``),
    so that a finding can be cited as ``file:line``. Lines longer than
    ``max_line_chars`` are cut."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    def read_lines(path: str, start: int = 1, count: int = 200) -> str:
        target = ws.resolve(path)
        shown = ws.display(target)
        if not target.is_file():
            raise ToolException(f"no file '{shown}' (list_dir shows what there is)")
        lines: list[str] = []
        total = 0
        with target.open(encoding="utf-8", errors="replace", newline="") as handle:
            for total, line in enumerate(handle, start=1):
                if "\0" in line:
                    raise ToolException(f"'{shown}' looks like a binary file")
                if start <= total < start + count:
                    text = line.rstrip("\r\n")
                    cut = text[:max_line_chars] + (" [...]" if len(text) > max_line_chars else "")
                    lines.append(f"{total:>5}| {cut}")
        if not lines:
            return f"['{shown}' has {total} lines; none from line {start}]"
        end = start + len(lines) - 1
        more = f"\n[lines {start}-{end} of {total}]" if end < total or start > 1 else ""
        return "\n".join(lines) + more

    return StructuredTool.from_function(
        func=read_lines,
        name="read_lines",
        description="Read a workspace text file with line numbers, to cite as file:line.",
        args_schema=_ReadLinesInput,
    )


def make_inspection_tools(workspace: Workspace | str | Path) -> list[BaseTool]:
    """``list_dir``, ``read_lines`` and ``python`` over ``workspace``. The first two
    only read; ``python`` is the actors' tool (a subprocess in the workspace), used
    to recompute figures from the files."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    listing = next(t for t in make_file_tools(ws) if t.name == "list_dir")
    return [listing, make_line_reader(ws), make_python_tool(ws)]
